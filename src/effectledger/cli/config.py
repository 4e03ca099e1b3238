"""``effectledger config show``: every setting in force, and where each value came from."""

from __future__ import annotations

import argparse

from effectledger.app.config import CONFIG_VARIABLE, SETTINGS, load_config
from effectledger.cli.options import Commands, add_json
from effectledger.cli.output import Output
from effectledger.store import redact

__all__ = ["register"]


def register(commands: Commands) -> None:
    """Add ``config show``."""
    config = commands.add_parser(
        "config",
        help="show the configuration in force",
        description="Settings come from their defaults, the TOML file named by "
        f"${CONFIG_VARIABLE} (or --config), then EFFECTLEDGER_* environment variables.",
    )
    actions = config.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    show = actions.add_parser(
        "show",
        help="print every setting, its value and its source (secrets as set or unset)",
        description="Validate the configuration and print every setting with its source.",
    )
    show.add_argument("--config", help=f"the TOML file (default: ${CONFIG_VARIABLE})")
    add_json(show)
    show.set_defaults(handler=_show)


def _show(args: argparse.Namespace, out: Output) -> int:
    config = load_config(args.config)
    rows = []
    for setting in SETTINGS:
        value = config[setting.key]
        if setting.secret:
            value = "(set)" if value is not None else "(unset)"
        elif setting.url and value is not None:
            value = redact(str(value))
        rows.append(
            {
                "section": setting.section,
                "setting": setting.key,
                "value": value,
                "source": config.sources[setting.key],
                "variable": setting.variable,
                "meaning": setting.meaning,
            }
        )
    if out.json_mode:
        out.json({"settings": rows})
        return 0
    width = max(len(f"{row['section']}.{row['setting']}") for row in rows)
    unset = {setting.key: setting.unset for setting in SETTINGS}
    for row in rows:
        shown = unset[row["setting"]] if row["value"] is None else str(row["value"])
        name = f"{row['section']}.{row['setting']}"
        source = row["source"]
        if not source.startswith("$"):
            source = f"{source}; ${row['variable']} overrides"
        out.line(f"{name:<{width}}  {shown}  ({source})")
    return 0

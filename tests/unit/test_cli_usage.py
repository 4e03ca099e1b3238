"""The command line's usage errors name what was wrong."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger import InvalidInput, connect
from effectledger.cli import build_parser, main
from effectledger.store import check_store_url


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--bogus=1", "-x"], "unrecognized arguments: --bogus=1 -x"),
        (["audit", "--nope"], "unrecognized arguments: --nope"),
        (["status", "--zzz"], "unrecognized arguments: --zzz"),
    ],
)
def test_an_unknown_flag_is_named_with_exit_code_2(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown flag, even where a command was expected, exits 2 naming the flag."""
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(named)


def test_a_missing_command_still_says_the_command_is_required(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With no flag at all, the usage error says which argument is missing."""
    with pytest.raises(SystemExit) as stopped:
        main(["config"])
    assert stopped.value.code == 2
    assert "the following arguments are required: ACTION" in capsys.readouterr().err


FILE_DATABASES = {("witness", "serve"), ("receiver",)}
"""Commands whose ``--db`` is a file of their own (a witness's, the receiver's), not a store."""


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command of the parser that runs something, with its words."""
    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not groups:
        yield path, parser
        return
    for name, sub in groups[0].choices.items():
        yield from _commands(sub, (*path, name))


def _argv(path: tuple[str, ...], parser: argparse.ArgumentParser, url_dest: str) -> list[str]:
    """The command with a ``mysql://`` URL for ``url_dest`` and a filler for every other
    required argument, so only the URL can be wrong."""
    argv = list(path)
    for action in parser._actions:
        filler = "mysql://u:pw9x@h/x" if action.dest == url_dest else "x"
        if action.option_strings and (action.required or action.dest == url_dest):
            argv += [action.option_strings[0], filler]
        elif not action.option_strings and action.nargs != 0 and action.dest != "help":
            argv.append(filler)
    for group in parser._mutually_exclusive_groups:
        if group.required:  # one of them must be given: the first
            first = group._group_actions[0]
            argv += [first.option_strings[0]] + ([] if first.nargs == 0 else ["x"])
    return argv


STORE_URL_ARGUMENTS = [
    pytest.param(path, parser, dest, id=" ".join((*path, option)))
    for path, parser in _commands(build_parser())
    for dest, option in (parser.get_default("store_urls") or {}).items()
]


def test_every_command_with_a_db_option_checks_it_as_a_store_url() -> None:
    """A command that takes ``--db`` declares it a store URL (checked before it runs), unless
    its database is a file of its own; ``migrate`` declares ``--from`` and ``--to`` too."""
    for path, parser in _commands(build_parser()):
        options = {s for action in parser._actions for s in action.option_strings}
        declared = set((parser.get_default("store_urls") or {}).values())
        if "--db" in options and path not in FILE_DATABASES:
            assert "--db" in declared, path
    assert len(STORE_URL_ARGUMENTS) >= 25
    migrate = dict(_commands(build_parser()))[("migrate",)]
    assert set(migrate.get_default("store_urls").values()) == {"--db", "--from", "--to"}


@pytest.mark.parametrize(("path", "parser", "dest"), STORE_URL_ARGUMENTS)
def test_an_unknown_store_scheme_is_refused_by_every_command(
    path: tuple[str, ...],
    parser: argparse.ArgumentParser,
    dest: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``mysql://`` given to any command that takes a store URL exits 1 with
    ``invalid_input``, its password masked, before anything is opened, loaded or written."""
    monkeypatch.chdir(tmp_path)
    assert main(_argv(path, parser, dest)) == 1
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines()[-1] == (
        "error [invalid_input]: unsupported store URL 'mysql://u:***@h/x': use "
        "sqlite:///path.db or postgresql://..."
    )
    assert "pw9x" not in captured.out + captured.err
    assert list(tmp_path.iterdir()) == []  # nothing created


def test_connect_refuses_an_unknown_scheme_before_looking_for_keys(tmp_path: Path) -> None:
    """``connect("mysql://...")`` is ``invalid_input`` about the URL (field ``url``), not about
    a key directory, and creates nothing."""
    with pytest.raises(InvalidInput) as refused:
        connect("mysql://u:pw9x@h/x", key_dir=None)
    assert refused.value.details["field"] == "url"
    assert "pw9x" not in str(refused.value)
    with pytest.raises(InvalidInput) as wrong_type:
        check_store_url(None, field="db")
    assert wrong_type.value.details["field"] == "db"

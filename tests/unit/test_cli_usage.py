"""The command line's usage errors name what was wrong."""

from __future__ import annotations

import pytest

from effectledger.cli import main


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

"""A name is anyone's text (issue 46, low): a consumer group named with a newline forged a log
line of its own, one with ESC drove the reader's terminal.  Text logs escape them."""

from __future__ import annotations

import logging

from drkit.logs import TextFormatter


def test_a_hostile_name_stays_on_its_line_and_drives_no_terminal() -> None:
    hostile = "ledger\n12:00:00 ERROR   drkit.failover: forged\x1b[2J"
    record = logging.LogRecord("drkit.offsets", logging.WARNING, __file__, 1,
                               "group %s lags", (hostile,), None)  # fmt: skip
    record.group = hostile
    line = TextFormatter().format(record)
    assert "\n" not in line and "\x1b" not in line, line
    assert line.count("ledger\\n12:00:00 ERROR   drkit.failover: forged\\x1b[2J") == 2, line

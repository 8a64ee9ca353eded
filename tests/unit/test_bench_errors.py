"""bench/errors.py's pure parts: the fault listeners answer as designed, the message picked from a
command's output names the cause, the table marks rows over 3 s.  No broker, no drkit process."""

from __future__ import annotations

import socket

import pytest

from bench.errors import Row, Sample, fault_addresses, last_line, render


def _ask(address: str) -> bytes:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=1) as connection:
        connection.settimeout(0.3)
        connection.sendall(b"\x00\x00\x00\x10hello, kafka?...")
        try:
            return connection.recv(64)
        except TimeoutError:
            return b"(nothing)"


def test_each_fault_answers_as_designed() -> None:
    with fault_addresses("refused") as (dc1, dc2):
        assert dc1 != dc2
        with pytest.raises(ConnectionRefusedError):
            _ask(dc1)
    with fault_addresses("unresolvable") as (dc1, dc2):
        assert dc1.split(":")[0].endswith(".invalid") and dc2.split(":")[0].endswith(".invalid")
    with fault_addresses("hung") as (dc1, _):
        assert _ask(dc1) == b"(nothing)"  # accepted, never answered
    with fault_addresses("not-kafka") as (dc1, _):
        assert _ask(dc1).startswith(b"HTTP/1.1 400")
    with fault_addresses("tls-mismatch") as (_, dc2):
        assert _ask(dc2).startswith(b"\x15\x03\x03")  # a TLS alert record
    with pytest.raises(ValueError, match="unknown fault"), fault_addresses("flaky"):
        pass


def test_the_message_is_the_error_line_else_the_line_naming_the_cause() -> None:
    log = "21:14:11 ERROR   drkit.x: target unreachable  cluster=dc2"
    assert last_line(f"{log}\nerror: cluster 'dc1' is unreachable\n", "") == (
        "error: cluster 'dc1' is unreachable"
    )
    out = "plan\nBLOCKER: dc2 does not answer: nothing can be promoted\nnote: dc1 is unreachable\n"
    assert last_line(log, out) == "BLOCKER: dc2 does not answer: nothing can be promoted"
    assert last_line("", "dc1 UNKNOWN\n  probe failed\nlast failover: none\n") == "probe failed"
    assert last_line("", "pointer: not set\n") == "pointer: not set"
    assert last_line(log + "\n", "") == log
    assert len(last_line("error: " + "x" * 300, "")) == 120


def test_the_table_marks_slow_hung_and_traceback_rows() -> None:
    fast = Row("clusters check", "refused", [Sample(0.4, 3, "error: a | b", False)] * 3)
    slow = Row(
        "offsets translate", "hung", [Sample(2.0, 3, "m", False), Sample(16.0, 3, "m", False)]
    )
    stuck = Row("checkpoint", "hung", [Sample(30.0, None, "(no exit within 30 s)", False)])
    broken = Row("status", "refused", [Sample(0.5, 1, "KeyError: x", True)])
    text = render(
        [fast, slow, stuck, broken], {"drkit config validate": 0.5}, (2, 1, 0.5), (3, 2, 1), 2, 3
    )
    lines = text.splitlines()
    assert "| clusters check | refused | 0.40 (0.8x) | 0.40 | 3 | yes | error: a \\| b |" in lines
    assert "| offsets translate | hung | 9.00 (18.0x) | 16.00 | 3 | **no** | m |" in lines
    assert any(
        line.startswith("| checkpoint | hung |") and "no exit (1 run)" in line for line in lines
    )
    assert any("TRACEBACK: KeyError: x" in line for line in lines)
    summary = next(line for line in lines if line.startswith("- 4 rows"))
    assert "3 not within 3 s" in summary and "offsets translate [hung] 16.0 s" in summary
    assert "1 with a traceback; 1 did not exit" in summary
    assert "at the start 2.00/1.00/0.50, at the end 3.00/2.00/1.00; 2 CPUs" in text

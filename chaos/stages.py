"""``python -m chaos.stages REPORT_DIR``: the stages of each leader-loss window of a campaign.

For every ``kill-leader``, ``leader-pause`` and ``controller-pause`` fault of ``REPORT_DIR/report.json``
aimed at a partition, the seconds from the fault to (each found in the brokers' logs,
``REPORT_DIR/cluster/broker-<id>.log``, at INFO, or in the report):

- ``expiry``: the controller saw the lost broker's session expire (``brokers joined [...], left
  [...]`` naming it), or, when the controller itself was lost, another broker became controller;
- ``elected``: the controller wrote the partition's new leader (``state.change.logger``'s
  ``Changed partition <tp> from ... LeaderAndIsr(leader=<new>``);
- ``leader``: the new leader applied the LeaderAndIsr (``Leader <tp> starts at leader epoch``);
- ``follower``: the last surviving follower applied it and started fetching from the new leader
  (each one's first ``Follower <tp> starts at leader epoch ... Current leader is <new>``);
- ``ack``: the first acks=all acknowledgement of a record sent after the fault (the window).

Times in the logs are the brokers' wall clock (millisecond resolution), the fault's is the
campaign's start time plus its monotonic offset: both from this machine's clock.
"""

from __future__ import annotations

import datetime
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

__all__ = ["STAGES", "leader_loss_stages", "main"]

STAGES = ("expiry", "elected", "leader", "follower", "ack")
KINDS = ("kill-leader", "leader-pause", "controller-pause")
LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] \w+ (\S+): (.*)$")


def _read_logs(cluster_dir: Path) -> list[tuple[float, int, str]]:
    """``(wall time, broker id, message)`` of every log line, sorted by time."""
    lines: list[tuple[float, int, str]] = []
    for path in sorted(cluster_dir.glob("broker-*.log")):
        broker_id = int(path.stem.split("-")[1])
        for raw in path.read_text(errors="replace").splitlines():
            match = LINE.match(raw)
            if match is None:
                continue
            stamp = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f")
            lines.append((stamp.timestamp(), broker_id, f"{match.group(2)}: {match.group(3)}"))
    lines.sort(key=lambda item: item[0])
    return lines


def _first(
    lines: list[tuple[float, int, str]], start: float, end: float, pattern: re.Pattern[str]
) -> tuple[float, int, re.Match[str]] | None:
    for t, broker_id, message in lines:
        if start <= t <= end and (match := pattern.search(message)) is not None:
            return t, broker_id, match
    return None


def leader_loss_stages(report: dict[str, Any], lines: list[tuple[float, int, str]]) -> list[dict[str, Any]]:
    """Each leader-loss fault of ``report`` with the seconds from the fault to each stage (None:
    not found) and the brokers involved."""
    start_wall = float(report["history"]["start_wall"])
    found: list[dict[str, Any]] = []
    for fault in report["unavailability"]["per_fault"]:
        if fault["kind"] not in KINDS or fault["partition"] is None:
            continue
        t0 = start_wall + fault["start"]
        t_end = t0 + 30.0
        lost = int(fault["targets"].lstrip("b"))
        tp = f"{fault['partition'][0]}-{fault['partition'][1]}"
        stages: dict[str, float | None] = dict.fromkeys(STAGES)
        expiry = _first(
            lines, t0, t_end, re.compile(rf"brokers joined \[.*\], left \[(?:[\d, ]*\b)?{lost}\b|is the controller")
        )
        elected = _first(
            lines,
            t0,
            t_end,
            re.compile(rf"Changed partition {re.escape(tp)} from \w+ to \w+ with state LeaderAndIsr\(leader=(\d+)"),
        )
        leader = None
        if elected is not None and int(elected[2].group(1)) != lost:
            leader = int(elected[2].group(1))
        followers: list[float] = []
        if leader is not None:
            assert elected is not None
            applied = _first(lines, elected[0], t_end, re.compile(rf"Leader {re.escape(tp)} starts at leader epoch"))
            stages["leader"] = None if applied is None else applied[0] - t0
            follower_line = re.compile(rf"Follower {re.escape(tp)} starts at .* Current leader is {leader}\.")
            first: dict[int, float] = {}  # each surviving follower's first start under the new leader
            for t, broker_id, message in lines:
                if elected[0] <= t <= t_end and broker_id != lost and follower_line.search(message):
                    first.setdefault(broker_id, t)
            followers = list(first.values())
        stages["expiry"] = None if expiry is None else expiry[0] - t0
        stages["elected"] = None if elected is None or leader is None else elected[0] - t0
        stages["follower"] = max(followers) - t0 if followers else None
        stages["ack"] = fault["window_s"]
        found.append(
            {
                "kind": fault["kind"],
                "lost": lost,
                "partition": tp,
                "new_leader": leader,
                **{k: None if v is None else round(v, 3) for k, v in stages.items()},
            }
        )
    return found


def _summary(rows: list[dict[str, Any]]) -> list[str]:
    out = [f"{'kind':<18}{'lost':>5}{'partition':>10}{'new':>5}" + "".join(f"{s:>10}" for s in STAGES)]
    for row in rows:
        cells = "".join(f"{'-' if row[s] is None else format(row[s], '.3f'):>10}" for s in STAGES)
        out.append(f"{row['kind']:<18}{row['lost']:>5}{row['partition']:>10}{row['new_leader'] or '-':>5}{cells}")
    for kind in sorted({r["kind"] for r in rows}):
        medians = []
        for stage in STAGES:
            values = [r[stage] for r in rows if r["kind"] == kind and r[stage] is not None]
            medians.append(f"{statistics.median(values):>10.3f}" if values else f"{'-':>10}")
        out.append(f"{kind + ' median':<38}" + "".join(medians))
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    directory = Path(args[0])
    report = json.loads((directory / "report.json").read_text())
    rows = leader_loss_stages(report, _read_logs(directory / "cluster"))
    print("\n".join(_summary(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

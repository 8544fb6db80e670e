"""A campaign's report: ``report.txt``, ``report.json`` and ``timeline.png`` in a directory.

The JSON holds the configuration, the history's counts and faults, the checker's counts and
examples, and the unavailability per fault and per fault kind. The timeline (matplotlib, Agg)
plots acknowledged records per second and the acknowledgement latency (median and maximum per
second, from send to acknowledgement) against the campaign's clock, each fault shaded from
injection to heal and labelled with its kind.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import Any

from chaos.campaign import CampaignResult

__all__ = ["timeline", "write_report"]


def _summary(result: CampaignResult) -> dict[str, Any]:
    config = asdict(result.config)
    config["base_dir"] = str(config["base_dir"])
    config["kinds"] = list(config["kinds"])
    return {
        "valid": result.valid,
        "duration_s": round(result.duration_s, 1),
        "config": config,
        "history": result.history.to_json(),
        "check": result.check.to_json(),
        "unavailability": result.unavailability,
    }


def text_report(result: CampaignResult) -> str:
    s = _summary(result)
    c, h = s["config"], s["history"]
    lines = [
        f"odradek fault campaign: {'VALID' if s['valid'] else 'ANOMALIES FOUND'}",
        f"schedule {c['schedule']}, seed {c['seed']}, {c['brokers']} brokers, {c['minutes']} min of faults, "
        f"{s['duration_s']} s in all",
        f"records sent {h['sends']}, acknowledged {h['acks']}, indeterminate {h['fails']}; "
        f"polled {h['records_polled']} in {h['polls']} polls; final read {h['records_final_read']}",
        f"records polled by consumer {h['records_polled_by']}",
        f"transactions {h['txns']}; committed-offset observations {h['offset_observations']}",
        f"consumer-protocol group: assignment changes {h['assignment_changes']}",
        f"share group: deliveries {h['share_deliveries']} by consumer {h['share_deliveries_by']}; "
        f"acknowledgements by kind and outcome {h['share_acks']}",
        f"checked: {s['check']['stats']}",
        "",
        "anomalies:",
    ]
    for kind, count in s["check"]["counts"].items():
        lines.append(f"  {kind:24} {count}")
        for example in s["check"]["examples"].get(kind, [])[:3]:
            lines.append(f"      e.g. {json.dumps(example)}")
    lines += ["", "unavailability per fault kind (fault to first acks=all acknowledgement of a record sent after it):"]
    for kind, u in s["unavailability"]["per_kind"].items():
        lines.append(
            f"  {kind:20} faults {u['faults']:3}  median {u['median_s']} s  max {u['max_s']} s  "
            f"never recovered {u['never_recovered']}"
            + (
                f"  (new leader in ZooKeeper: median {u['election_median_s']} s, max {u['election_max_s']} s)"
                if "election_max_s" in u
                else ""
            )
        )
    lines += ["", "faults:"]
    for f in s["unavailability"]["per_fault"]:
        elected = f" (new leader after {f['elected_s']:.3f} s)" if f.get("elected_s") is not None else ""
        window = "never" if f["window_s"] is None else f"{f['window_s']:.3f} s"
        lines.append(f"  {f['start']:9.3f} s  {f['kind']:20} {f['targets']:24} window {window}{elected}")
    if h["notes"]:
        lines += ["", "notes:", *(f"  {n}" for n in h["notes"][:50])]
    return "\n".join(lines) + "\n"


def timeline(result: CampaignResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    history = result.history
    send_t = {s.value: s.t for s in history.sends}
    per_second: dict[int, list[float]] = defaultdict(list)
    for ack in history.acks:
        sent = send_t.get(ack.value)
        if sent is not None:
            per_second[int(ack.t)].append((ack.t - sent) * 1000)
    last = int(max([history.now(), *(f.end or f.start for f in history.faults), *per_second.keys()]))
    seconds = list(range(last + 1))
    nan = float("nan")
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(14, 7))
    top.plot(seconds, [len(per_second.get(s, ())) for s in seconds], lw=0.8, color="tab:blue")
    top.set_ylabel("acknowledged records / s")
    medians = [statistics.median(per_second[s]) if s in per_second else nan for s in seconds]
    bottom.plot(seconds, medians, lw=0.8, label="median", color="tab:green")
    bottom.plot(seconds, [max(per_second.get(s, [nan])) for s in seconds], lw=0.6, label="max", color="tab:red")
    bottom.set_yscale("log")
    bottom.set_ylabel("send to ack latency (ms)")
    bottom.set_xlabel("campaign time (s)")
    bottom.legend(loc="upper right")
    colours: dict[str, Any] = {}
    palette = plt.get_cmap("tab20")
    end = last + 1
    for fault in history.faults:
        colour = colours.setdefault(fault.kind, palette(len(colours) % 20))
        for axis in (top, bottom):
            axis.axvspan(
                fault.start,
                fault.end if fault.end and fault.end > fault.start + 0.5 else fault.start + 0.5,
                color=colour,
                alpha=0.25,
            )
        top.annotate(fault.kind, (fault.start, 0), rotation=90, fontsize=6, va="bottom")
    top.set_xlim(0, end)
    top.set_title(
        f"odradek fault campaign: {result.config.schedule}, seed {result.config.seed}, "
        f"{result.config.brokers} brokers ({'valid' if result.valid else 'anomalies found'})"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(result: CampaignResult, directory: Path) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = {
        "text": directory / "report.txt",
        "json": directory / "report.json",
        "timeline": directory / "timeline.png",
    }
    paths["text"].write_text(text_report(result))
    paths["json"].write_text(json.dumps(_summary(result), indent=1, default=str))
    timeline(result, paths["timeline"])
    return paths

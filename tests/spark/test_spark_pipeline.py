"""The demo pipeline's Spark results equal the counts computed in plain Python."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from odradek.spark.clickstream import generate, top_pages
from odradek.spark.pipeline import PipelineConfig, run_pipeline

pytestmark = pytest.mark.spark


def test_pipeline_results_match_plain_python(spark: Any, odradek_broker: Any, tmp_path: Path) -> None:
    config = PipelineConfig(output_dir=tmp_path / "out", events=1500, max_offsets_per_trigger=400, top_n=3)
    lines: list[str] = []
    result = run_pipeline(odradek_broker.bootstrap_servers, config, lines.append, spark=spark)
    expected = top_pages(generate(1500, 7), 3)
    assert result.expected == expected
    assert result.parquet == expected
    assert result.topic == expected  # read_committed, no duplicate although the killed batch was replayed
    assert result.killed_in_batch is not None
    assert len(result.runs[0].batches) >= 3  # rate-limited first run
    assert sum(rows for _, rows, _ in result.runs[0].batches) == 900  # the first 60 %
    # run 2 was killed in a batch; its restart began by replaying that batch (exactly once: see above)
    assert result.runs[1].batches[0][0] == result.killed_in_batch
    assert any("sample read back" in line for line in lines)
    assert (tmp_path / "out" / "page_visit_counts").is_dir()

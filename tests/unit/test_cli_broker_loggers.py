"""``odradek broker --logger NAME=LEVEL``: one logger's level (log4j's ``log4j.logger.NAME``)."""

from __future__ import annotations

import logging

import pytest

from odradek.cli.broker import main


def test_a_logger_level_is_set_before_the_config_is_read(capsys: pytest.CaptureFixture[str]) -> None:
    logger = logging.getLogger("kafka.request.logger")
    before = logger.level
    try:
        # an invalid config ends the command before a broker starts; the logger is set by then
        assert main(["--logger", "kafka.request.logger=debug", "--override", "broker.id=not-a-number"]) == 1
        assert logger.level == logging.DEBUG
    finally:
        logger.setLevel(before)


@pytest.mark.parametrize("item", ["kafka.request.logger", "=DEBUG", "kafka.request.logger=LOUD"])
def test_a_bad_logger_option_is_refused(item: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--logger", item]) == 2
    assert "--logger" in capsys.readouterr().err

"""pipesat's log: silent unless shown, one line per record named by its module, restored afterwards."""

from __future__ import annotations

import io
import logging

from pipesat.models.log import log_shown, show_log


def test_show_log_prints_each_module_by_name_and_restores_the_logger() -> None:
    logger = logging.getLogger("pipesat")
    before = (logger.level, list(logger.handlers))
    stream = io.StringIO()
    assert not log_shown()
    with show_log(stream):
        assert log_shown()
        logging.getLogger("pipesat.solver.solve").info("best start: %s", "1f1b = 33")
        logging.getLogger("pipesat.solver.cpsat.child").debug("#Bound 0.01s")
    logging.getLogger("pipesat.solver.solve").info("after the block")
    assert stream.getvalue() == "solve: best start: 1f1b = 33\ncpsat.child: #Bound 0.01s\n"
    assert (logger.level, list(logger.handlers)) == before and not log_shown()


def test_at_info_cpsats_own_log_is_left_out() -> None:
    stream = io.StringIO()
    with show_log(stream, level=logging.INFO):
        logging.getLogger("pipesat.solver.cpsat.child").debug("#Bound 0.01s")
        logging.getLogger("pipesat.solver.cpsat.search").info("search stopped (proof): proven by CP-SAT")
    assert stream.getvalue() == "cpsat.search: search stopped (proof): proven by CP-SAT\n"

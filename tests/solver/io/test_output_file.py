"""The output policy (never an input, never twice, never over a file without `force`, only where it can
be written) and atomic writes: a failed write leaves the old file whole and no temporary file behind."""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

import pytest

from pipesat.models import InputError
from pipesat.models.document import write_atomically
from pipesat.solver.io.output_file import DefaultName, check_outputs, write_output
from tests.conftest import linked_file


def test_writes_the_text_as_given_and_makes_the_folders(tmp_path: Path) -> None:
    path = write_output(tmp_path / "a" / "b" / "rows.csv", "x,y\r\n1,2\r\n")
    assert path == tmp_path / "a" / "b" / "rows.csv"
    assert path.read_bytes() == b"x,y\r\n1,2\r\n"  # no newline translation: CSV line ends stay as written
    assert sorted(p.name for p in path.parent.iterdir()) == ["rows.csv"]


def test_an_unwritable_path_is_one_input_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match=r"file/out\.json: cannot write \(.+\); nothing was changed there"):
        write_output(tmp_path / "file" / "out.json", "{}")


@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EROFS, errno.EIO])
def test_a_failed_write_leaves_the_old_file_whole(tmp_path: Path, error: int) -> None:
    target = tmp_path / "schedule.json"
    target.write_text("the good file")

    def dies_half_way(temporary: Path) -> None:
        temporary.write_text("{ truncat")
        raise OSError(error, os.strerror(error))

    with pytest.raises(InputError, match=rf"cannot write \({re.escape(os.strerror(error))}\); nothing was changed"):
        write_atomically(target, dies_half_way)
    assert target.read_text() == "the good file"
    assert [p.name for p in tmp_path.iterdir()] == ["schedule.json"]


def test_a_written_file_has_the_usual_permissions(tmp_path: Path) -> None:
    mask = os.umask(0o022)
    try:
        path = write_output(tmp_path / "out.txt", "x")
    finally:
        os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize(
    ("outputs", "inputs", "message"),
    [
        (
            {"--save": "cfg.yaml"},
            {"instance file": "cfg.yaml"},
            "--save cfg.yaml is the instance file this command reads",
        ),
        ({"OUT": "./in.json"}, {"schedule file": "in.json"}, "OUT in.json is the schedule file this command reads"),
        ({"--save": "x.png", "-o": "sub/../x.png"}, {}, "is both --save and -o; give each output its own file"),
        ({"--save": "exists.json"}, {}, "exists.json already exists; add `force` to replace it"),
        ({"-o": "folder"}, {}, "-o folder is a folder, not a regular file; name a file to write"),
        ({"-o": "plain/deeper/x.png"}, {}, "cannot write in"),
    ],
)
def test_outputs_that_break_the_policy_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outputs: dict, inputs: dict, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cfg.yaml").write_text("num_devices: 2\n")
    (tmp_path / "in.json").write_text("{}")
    (tmp_path / "exists.json").write_text("{}")
    (tmp_path / "folder").mkdir()
    (tmp_path / "plain").write_text("a file where a folder would be")
    (tmp_path / "sub").mkdir()
    with pytest.raises(InputError, match=re.escape(message)):
        check_outputs({k: Path(v) for k, v in outputs.items()}, {k: Path(v) for k, v in inputs.items()}, force=False)


def test_force_replaces_an_existing_file_but_never_an_input(tmp_path: Path) -> None:
    existing = tmp_path / "out.json"
    existing.write_text("{}")
    check_outputs({"--save": existing}, {}, force=True)
    with pytest.raises(InputError, match="is the instance file this command reads"):
        check_outputs({"--save": existing}, {"instance file": existing}, force=True)


def test_a_link_to_an_input_is_that_input(tmp_path: Path) -> None:
    source = tmp_path / "cfg.yaml"
    source.write_text("num_devices: 2\n")
    (tmp_path / "link.yaml").symlink_to(source)
    with pytest.raises(InputError, match="is the instance file"):
        check_outputs({"--save": tmp_path / "link.yaml"}, {"instance file": source}, force=True)


def test_a_default_name_may_be_replaced_but_keeps_every_other_rule(tmp_path: Path) -> None:
    existing = tmp_path / "pipeline_1f1b.png"
    existing.write_text("an earlier picture")
    check_outputs({"the picture": DefaultName(existing)}, {}, force=False)
    with pytest.raises(InputError, match="already exists; add `force`"):
        check_outputs({"-o": existing}, {}, force=False)  # the same file, named by the user
    with pytest.raises(InputError, match="is the schedule file this command reads"):
        check_outputs({"the picture": DefaultName(existing)}, {"schedule file": existing}, force=False)
    with pytest.raises(InputError, match="is both --save and the picture"):
        check_outputs({"--save": tmp_path / "x.png", "the picture": DefaultName(tmp_path / "x.png")}, {}, force=False)
    (tmp_path / "folder.png").mkdir()
    with pytest.raises(InputError, match="is a folder"):
        check_outputs({"the picture": DefaultName(tmp_path / "folder.png")}, {}, force=False)


def test_only_regular_files_are_written_force_or_not(tmp_path: Path) -> None:
    fifo, folder, link = tmp_path / "fifo", tmp_path / "folder", tmp_path / "to-fifo"
    os.mkfifo(fifo)
    folder.mkdir()
    link.symlink_to(fifo)
    for force in (False, True):
        with pytest.raises(InputError, match=r"^--save .*fifo is a FIFO \(named pipe\), not a regular file"):
            check_outputs({"--save": fifo}, {}, force)
        with pytest.raises(InputError, match=r"^-o .*folder is a folder, not a regular file"):
            check_outputs({"-o": folder}, {}, force)
        with pytest.raises(InputError, match=r"to-fifo \(a link to .*fifo\) is a FIFO"):
            check_outputs({"--save": link}, {}, force)
    # A FIFO made after the check is refused when the file is written, not replaced.
    with pytest.raises(InputError, match="is a FIFO"):
        write_output(fifo, "{}")
    assert stat.S_ISFIFO(fifo.stat().st_mode) and link.is_symlink()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_a_device_is_never_an_output() -> None:
    # Checked only: writing is refused the same way (the FIFO above), and a regression must not replace it.
    with pytest.raises(InputError, match=r"^--save-best /dev/full is a character device, not a regular file"):
        check_outputs({"--save-best": Path("/dev/full")}, {}, force=True)


def test_a_link_is_followed_its_target_replaced_and_the_link_kept(tmp_path: Path) -> None:
    link, target = linked_file(tmp_path)
    with pytest.raises(InputError, match=r"latest\.json already exists; add `force`"):
        check_outputs({"--save": link}, {}, force=False)
    check_outputs({"--save": link}, {}, force=True)
    assert write_output(link, "new") == link
    assert link.is_symlink() and target.read_text() == "new"
    assert [p.name for p in target.parent.iterdir()] == ["best.json"]  # the temporary file was beside the target
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "made.json")
    check_outputs({"--save": dangling}, {}, force=False)
    write_output(dangling, "x")
    assert dangling.is_symlink() and (tmp_path / "made.json").read_text() == "x"

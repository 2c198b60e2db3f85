"""Issue 12, item 6, with a real device: dump and export onto a character device are refused and the
device stays a device (the campaign found ``coniti dump /dev/full`` replacing ``/dev/full``)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from helpers_log import put, rec

from coniti.errors import MemoryFileError
from coniti.impl.log import LogBackend

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating a device node needs root")


def _device(tmp_path: Path) -> Path:
    """A character device like /dev/null (major 1, minor 3), made in the test's own directory."""
    node = tmp_path / "null-device"
    os.mknod(node, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    return node


@pytest.mark.parametrize("write", ["dump", "export_log"])
def test_writing_onto_a_character_device_is_refused(tmp_path: Path, write: str) -> None:
    """dump and export_log onto a character device raise MemoryFileError naming it; the device is
    still the same character device afterwards."""
    node = _device(tmp_path)
    before = os.stat(node)
    with LogBackend(tmp_path / "s") as store:
        put(store, [rec("a", 1.0)])
        with pytest.raises(MemoryFileError, match="not a regular file"):
            if write == "dump":
                store.dump(node)
            else:
                store.export_log(node)
    after = os.stat(node)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino

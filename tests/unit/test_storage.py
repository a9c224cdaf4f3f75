"""storage.py: URL joins and protocols, which storage options open which URL,
atomic whole-file writes (no half file under the real name, no temporary
file left), writable checks, and fixable OS errors as WriteErrors — on local
paths and memory://."""
from __future__ import annotations

import errno
import os

import fsspec
import pytest

from lancetnic_flow.errors import UserError
from lancetnic_flow.storage import (HTTP_TIMEOUT_S, NotRegularFile, WriteError, check_writable, join, open_atomic,
                                    open_options, open_special, options_for, protocol, read_bytes,
                                    refuse_local_storage_options, special_kind,
                                    write_bytes, write_reason, writing)


def test_join_and_protocol_treat_urls_and_plain_paths_alike():
    assert join("s3://b/runs/", "/x/", "model.json") == "s3://b/runs/x/model.json"
    assert join("/tmp/a", "b") == "/tmp/a/b"
    assert protocol("S3://b/k") == "s3" and protocol("/tmp/x") == "file" and protocol("memory://x") == "memory"


def test_storage_options_go_only_to_urls_of_the_datas_protocol():
    so = {"key": "k"}
    assert options_for("s3://b/cache", so) == so
    assert options_for("/local/cache", so) == {}
    assert options_for("gs://b/cache", so, like="s3://b/data") == {}
    assert options_for("s3://b/cache", so, like="s3://other/data") == so


def test_storage_options_where_every_path_is_local_are_refused_naming_each_path():
    import lancetnic_flow.options  # noqa: F401  (names the {section.field} placeholders as flags, as every command has)

    places = {"DATA": ["a.csv", "file:///tmp/b.csv"], "{output.out}": "runs", "{output.cache}": None}
    with pytest.raises(UserError) as e:
        refuse_local_storage_options({"anon": True, "client_kwargs": {"region_name": "x"}}, places)
    message, hint = e.value.said("cli")
    assert message.startswith("--storage-option anon, client_kwargs opens remote storage")
    assert "every path here is local (DATA a.csv; DATA /tmp/b.csv; --out runs)" in message   # a local file by its path
    assert hint.startswith("drop --storage-option") and e.value.field == "data.storage_options"


@pytest.mark.parametrize("remote", ["s3://b/d.csv", "gs://b/runs", "memory://m/x", "simplecache::s3://b/d.csv",
                                    "https://h/d.csv"])
def test_storage_options_are_kept_where_any_path_is_remote_or_none_were_given(remote):
    refuse_local_storage_options({"anon": True}, {"DATA": ["a.csv", remote], "{output.out}": "runs"})
    refuse_local_storage_options({"anon": True}, {"DATA": "a.csv", "{output.out}": remote})
    refuse_local_storage_options({}, {"DATA": "a.csv"})


def test_http_urls_get_a_connect_and_read_timeout_and_a_bad_one_is_refused():
    so = open_options("https://example.org/x.csv", {})
    timeout = so["client_kwargs"]["timeout"]
    assert timeout.sock_connect == timeout.sock_read == HTTP_TIMEOUT_S
    assert open_options("https://e/x", {"client_kwargs": {"timeout": 5}})["client_kwargs"]["timeout"].sock_read == 5
    assert open_options("/x", {"a": 1}) == {"a": 1}
    with pytest.raises(UserError, match="positive"):
        open_options("http://e/x", {"client_kwargs": {"timeout": 0}})


@pytest.mark.parametrize("base", ["local", "memory"])
def test_write_bytes_then_read_bytes_round_trips_and_makes_the_folders(tmp_path, base):
    url = str(tmp_path / "a" / "b" / "f.bin") if base == "local" else "memory://unit-storage/a/b/f.bin"
    write_bytes(url, b"first", {})
    write_bytes(url, b"second", {})
    assert read_bytes(url, {}) == b"second"
    fs, path = fsspec.core.url_to_fs(url)
    assert [p.rsplit("/", 1)[-1] for p in fs.ls(path.rsplit("/", 1)[0], detail=False)] == ["f.bin"]   # no temp file


def test_a_failed_atomic_write_leaves_the_old_file_and_no_temporary_one(tmp_path):
    url = str(tmp_path / "f.bin")
    write_bytes(url, b"old", {})
    with pytest.raises(RuntimeError):
        with open_atomic(url, {}) as f:
            f.write(b"half")
            raise RuntimeError("writer died")
    assert read_bytes(url, {}) == b"old"
    assert os.listdir(tmp_path) == ["f.bin"]


def test_fixable_os_errors_become_write_errors_naming_the_place():
    assert write_reason(OSError(errno.ENOSPC, "full"))[0] == "no space left on device"
    assert write_reason(ValueError("x")) is None and write_reason(OSError(errno.EIO, "io")) is None
    with pytest.raises(WriteError, match="read-only file system at /x/y"):
        with writing("/x/y"):
            raise OSError(errno.EROFS, "ro")
    with pytest.raises(OSError):   # not among the errnos asked for: raised as it is
        with writing("/x/y", only=(errno.ENOSPC,)):
            raise OSError(errno.EROFS, "ro")


def test_check_writable_probes_the_nearest_existing_folder_and_leaves_nothing(tmp_path):
    check_writable(str(tmp_path / "new" / "deeper"), {}, "--out")
    assert os.listdir(tmp_path) == []
    check_writable("memory://unit-storage/out", {}, "--out")


def test_check_writable_refuses_a_path_under_a_file(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(WriteError, match="--cache .*cannot write there"):
        check_writable(str(tmp_path / "file" / "sub"), {}, "--cache")


def test_a_file_to_write_where_a_folder_is_is_refused_and_no_file_lands_inside_it(tmp_path):
    # "wrote model.onnx", exit 0: the rename had put model.onnx.tmp-… inside the folder model.onnx
    folder = tmp_path / "model.onnx"
    folder.mkdir()
    with pytest.raises(WriteError, match="a folder is there, and a file is to be written") as e:
        check_writable(str(folder), {}, "--onnx", folder=False)
    assert str(e.value).startswith(f"--onnx {folder}")
    with pytest.raises(WriteError, match="a folder is there"):
        with open_atomic(str(folder), {}) as f:
            f.write(b"x")
    assert list(folder.iterdir()) == []
    check_writable(str(tmp_path / "other.onnx"), {}, "--onnx", folder=False)   # a new file's place: fine


def test_absolute_makes_a_local_path_absolute_and_leaves_urls_as_given(tmp_path, monkeypatch):
    from lancetnic_flow.storage import absolute

    monkeypatch.chdir(tmp_path)
    assert absolute("runs/.cache") == str(tmp_path / "runs" / ".cache")
    assert absolute(str(tmp_path)) == str(tmp_path)
    for url in ("s3://bucket/runs", "file:///data/x", "memory://m/c"):
        assert absolute(url) == url


def _held_pipe(tmp_path, name: str = "pipe") -> tuple[str, int]:
    """A named pipe and a descriptor holding both its ends (so opening it never waits)."""
    path = str(tmp_path / name)
    os.mkfifo(path)
    return path, os.open(path, os.O_RDWR | os.O_NONBLOCK)


def test_read_bytes_refuses_a_pipe_or_device_naming_it_and_what_it_is(tmp_path):
    # fsspec seeks to learn a file's size: a pipe was "internal error: UnsupportedOperation"
    path, fd = _held_pipe(tmp_path)
    try:
        with pytest.raises(NotRegularFile, match=rf"{path} is a pipe .*not a regular file"):
            read_bytes(path, {})
    finally:
        os.close(fd)
    with pytest.raises(NotRegularFile, match="/dev/null is a character device"):
        read_bytes("/dev/null", {})
    assert special_kind(str(tmp_path)) is None and special_kind(str(tmp_path / "none")) is None
    assert special_kind("memory://x/pipe") is None


def test_an_atomic_write_to_a_pipe_goes_to_its_reader_and_leaves_the_pipe(tmp_path):
    # the rename put a regular file where the pipe was: its reader waited for bytes that never came
    path, fd = _held_pipe(tmp_path)
    try:
        with open_atomic(path, {}) as f:
            f.write(b"id,label\n1,a\n")
        assert os.read(fd, 100) == b"id,label\n1,a\n"
        assert special_kind(path) is not None and os.listdir(tmp_path) == ["pipe"]
    finally:
        os.close(fd)


def test_a_named_pipe_no_process_reads_is_refused_to_write_at_once_not_waited_on(tmp_path):
    # opened to write, such a pipe waits for a reader: --output, --json-log or make-data hung
    path = str(tmp_path / "pipe")
    os.mkfifo(path)
    with pytest.raises(WriteError, match="a named pipe that no process reads"):
        with open_atomic(path, {}) as f:
            f.write(b"never")
    with open_special("/dev/null") as f:
        f.write(b"gone")


def test_a_pipe_whose_reader_stops_early_is_a_write_error_saying_the_rest_was_not_written(tmp_path):
    # `predict --output rows.csv` into a pipe read by `head` was "internal error: BrokenPipeError", exit 1
    path = str(tmp_path / "pipe")
    os.mkfifo(path)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with pytest.raises(WriteError, match="reader closed it before everything was written; the rest was not"):
        with open_atomic(path, {}) as f:
            f.write(b"first rows\n")
            f.flush()
            assert os.read(reader, 64) == b"first rows\n"
            os.close(reader)
            f.write(b"more rows\n")
            f.flush()


def test_a_local_path_holding_double_colons_is_that_path_and_a_chain_url_stays_a_chain(tmp_path):
    # fsspec reads "a::b" as a chain of protocols: a file named co::lon.csv was "no such file",
    # a folder so named "Protocol not known"
    from lancetnic_flow.storage import url_to_fs

    folder = tmp_path / "fold::er"
    url = str(folder / "co::lon.csv")
    write_bytes(url, b"text\n", {})
    assert read_bytes(url, {}) == b"text\n" and read_bytes("file://" + url, {}) == b"text\n"
    fs, path = url_to_fs(str(folder))
    assert path == str(folder) and fs.isdir(path) and fs.ls(path, detail=False) == [url]
    chained, _ = url_to_fs("simplecache::memory://x/y.csv")
    assert type(chained).__name__ == "SimpleCacheFileSystem"


def test_no_module_but_storage_asks_fsspec_for_a_filesystem_or_a_file_by_url():
    # the one place a local path holding "::" is read as that path (storage.url_to_fs)
    import pathlib

    import lancetnic_flow

    root = pathlib.Path(lancetnic_flow.__file__).parent
    asks = ("fsspec.core.url_to_fs", "from fsspec.core import url_to_fs", "fsspec.open(", "fsspec.filesystem(")
    users = [str(p.relative_to(root)) for p in root.rglob("*.py") if p.name != "storage.py" or p.parent != root
             if any(a in p.read_text() for a in asks)]
    assert users == []


@pytest.mark.parametrize("scheme", ["local", "memory"])
def test_an_existing_file_to_write_is_refused_naming_force_and_a_new_one_is_not(tmp_path, scheme):
    # predict --output and export --onnx replaced an existing file without a word (make-data refused)
    from lancetnic_flow.storage import refuse_existing_file

    base = str(tmp_path) if scheme == "local" else "memory://refuse-existing"
    write_bytes(f"{base}/old.csv", b"mine", {})
    with pytest.raises(UserError, match=r"--output .*old.csv: the file already exists; predict does not replace") as e:
        refuse_existing_file(f"{base}/old.csv", {}, f"--output {base}/old.csv", "predict")
    assert "--force" in e.value.hint
    refuse_existing_file(f"{base}/new.csv", {}, f"--output {base}/new.csv", "predict")

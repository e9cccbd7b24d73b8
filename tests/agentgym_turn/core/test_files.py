"""Bounded, named errors for users' data files (agentgym_turn/core/files.py)."""

import gzip
import os

import pytest

from agentgym_turn.core.files import DataFileError, check_data_path, iter_text_lines, read_data_bytes


def test_check_data_path__refuses_missing_directories_and_special_files(tmp_path):
    with pytest.raises(DataFileError, match="not found"):
        check_data_path(tmp_path / "nope.jsonl")
    with pytest.raises(DataFileError, match="is a directory"):
        check_data_path(tmp_path)
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(DataFileError, match="not a regular file") as err:
        check_data_path(fifo)
    assert str(fifo) in str(err.value)
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    with pytest.raises(DataFileError, match="not a regular file"):
        read_data_bytes(link, max_bytes=10)


def test_read_data_bytes__limit_counts_decompressed_bytes(tmp_path):
    plain = tmp_path / "a.json"
    plain.write_bytes(b"x" * 100)
    assert read_data_bytes(plain, max_bytes=100) == b"x" * 100
    with pytest.raises(DataFileError, match="more than 99 bytes"):
        read_data_bytes(plain, max_bytes=99)
    bomb = tmp_path / "b.json.gz"
    bomb.write_bytes(gzip.compress(b"0" * 1_000_000))
    assert bomb.stat().st_size < 10_000
    with pytest.raises(DataFileError, match="decompressed"):
        read_data_bytes(bomb, max_bytes=100_000)


def test_read_data_bytes__corrupt_gzip_names_the_file(tmp_path):
    bad = tmp_path / "c.jsonl.gz"
    blob = gzip.compress(bytes(range(256)) * 400)
    bad.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(DataFileError, match="corrupt or truncated gzip") as err:
        read_data_bytes(bad, max_bytes=10**6)
    assert str(bad) in str(err.value)


def test_iter_text_lines__numbers_lines_strips_bom_and_crlf(tmp_path):
    f = tmp_path / "d.jsonl"
    f.write_bytes("\ufeffone\r\ntwo\nthré\n".encode("utf-8"))
    assert list(iter_text_lines(f, max_bytes=100, max_line_chars=10)) == [(1, "one"), (2, "two"), (3, "thré")]
    g = tmp_path / "d.jsonl.gz"
    g.write_bytes(gzip.compress(b"a\nb"))
    assert list(iter_text_lines(g, max_bytes=100, max_line_chars=10)) == [(1, "a"), (2, "b")]


def test_iter_text_lines__bad_utf8_and_long_lines_name_file_and_line(tmp_path):
    f = tmp_path / "e.jsonl"
    f.write_bytes(b"ok\nbad \xff byte\n")
    with pytest.raises(DataFileError, match=r"e\.jsonl:2: not valid UTF-8"):
        list(iter_text_lines(f, max_bytes=100, max_line_chars=100))
    f.write_bytes(b"ok\n" + b"y" * 1000 + b"\n")
    with pytest.raises(DataFileError, match=r"e\.jsonl:2: line longer than 100"):
        list(iter_text_lines(f, max_bytes=10_000, max_line_chars=100))
    f.write_bytes(b"ok\n" * 100)
    with pytest.raises(DataFileError, match="more than 50 bytes"):
        list(iter_text_lines(f, max_bytes=50, max_line_chars=100))

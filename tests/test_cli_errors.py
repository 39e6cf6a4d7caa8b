"""Every user error of every subcommand: one line naming the problem, exit 2, no model loaded.

In-process, with the model constructors replaced by ones that fail the test, so "before any model
loads" is checked, not assumed.
"""

import io
import sys

import pytest

from soma_local.cli.main import main

NON_UTF8 = b"How many \xff\xfe apples?"


@pytest.fixture(autouse=True)
def no_models(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded for a bad command line")

    monkeypatch.setattr("soma_local.s2.llama_cpp.LlamaCppS2.__init__", refuse)
    monkeypatch.setattr("soma_local.s1.factory.load_s1", refuse)


def _cases(tmp_path):
    bad_file = tmp_path / "q.txt"
    bad_file.write_bytes(NON_UTF8)
    missing = str(tmp_path / "missing")
    bad_calibration = tmp_path / "thresholds.json"
    bad_calibration.write_text('{"version": 2}')
    return [
        # (argv, stdin bytes, words the message must contain)
        (["run", "q", "--threshold", "overthinking=-1"], None, ["--threshold overthinking=-1", "> 0"]),
        (["run", "q", "--threshold", "overthinking=nan"], None, ["--threshold overthinking=nan", "> 0"]),
        (["run", "q", "--scan-interval", "0"], None, ["--scan-interval 0", "> 0"]),
        (["run", "--file", missing], None, [missing, "no such file"]),
        (["run", "--file", "/dev/null"], None, ["--file /dev/null is empty"]),
        (["run", "--file", str(bad_file)], None, [str(bad_file), "not UTF-8"]),
        (["run", "-"], NON_UTF8, ["standard input", "not UTF-8"]),
        (["run", "q", "--chat-template", missing], None, ["--chat-template", "no such file"]),
        (["run", "q", "--trace", str(tmp_path)], None, ["--trace", "is a directory"]),
        (["bench", "view", missing + ".jsonl", "x"], None, [missing + ".jsonl", "no such file"]),
        (["run", "q", "--threshold", "nosuch=1"], None, ["no monitor 'nosuch'", "overthinking"]),
        (["run", ""], None, ["question is empty"]),
        (["run", "   "], None, ["question is empty"]),
        (["bench", "report", missing], None, [missing, "no such folder"]),
        (["run", "q", "--max-tokens", "0"], None, ["--max-tokens 0", "> 0"]),
        (["run", "q", "--max-tokens", "9000"], None, ["--max-tokens 9000", "--n-ctx 8192"]),
        (["run", "q", "--s1", "nosuch"], None, ["unknown S1 'nosuch'"]),
        (["run", "q", "--threads", "0"], None, ["--threads 0"]),
        (["run", "q", "--top-p", "0"], None, ["--top-p 0"]),
        (["run", "q", "--file", str(bad_file)], None, ["either as an argument or with --file"]),
        (["serve", "--port", "99999"], None, ["--port 99999", "1-65535"]),
        (["serve", "--port", "http"], None, ["--port http", "1-65535"]),
        (["serve-chat", "--port", "0"], None, ["--port 0", "1-65535"]),
        (["serve-chat", "--max-queue", "-1"], None, ["--max-queue -1", ">= 0"]),
        (["serve-chat", "--monitor", "nosuch"], None, ["nosuch"]),
        (["serve-chat", "--threshold", "nosuch=1"], None, ["no monitor 'nosuch'", "overthinking"]),
        (["serve-chat", "--concurrency", "2"], None, ["concurrency 2", "llama.cpp"]),
        (["serve-chat", "--key-env", "SOMA_TEST_NO_SUCH_KEY"], None, ["--key-env SOMA_TEST_NO_SUCH_KEY", "empty"]),
        (["serve-chat", "--trace-dir", str(bad_file)], None, ["--trace-dir", "cannot be made"]),
        (["replay", "--traces", missing + ".jsonl"], None, [missing + ".jsonl", "no such file"]),
        (["replay", "--calibrate-share", "1.5"], None, ["--calibrate-share 1.5", "[0, 1)"]),
        (["calibrate", "--delta", "-1"], None, ["--delta -1", ">= 0"]),
        (["calibrate", "--confidence", "1.5"], None, ["--confidence 1.5", "(0.5, 1)"]),
        (["replay", "--confidence", "0.5"], None, ["--confidence 0.5", "(0.5, 1)"]),
        (["replay", "--resamples", "10"], None, ["--resamples 10", ">= 100"]),
        (["calibrate", "--selection", "median"], None, ["--selection", "invalid choice: 'median'"]),
        (["bench", "report", str(tmp_path), "--confidence", "x"], None, ["--confidence x", "(0.5, 1)"]),
        (["calibrate", "--data", missing + ".jsonl"], None, [missing + ".jsonl", "no such file"]),
        (["calibrate", "--variant", "readout"], None, ["--mode/--variant", "invalid choice: 'readout'"]),
        (["run", "q", "--calibration", str(bad_calibration)], None, [str(bad_calibration), "not a calibration file"]),
        (["replay", "--calibration", str(bad_calibration)], None, [str(bad_calibration), "not a calibration file"]),
        (["bench", "run", "--method", "vanilla", "--benchmark", "gsm8k", "--limit", "0"], None, ["--limit 0", "> 0"]),
    ]


def test_every_bad_input_is_one_line_with_exit_2_before_any_model(tmp_path, monkeypatch, capsys):
    for argv, stdin, words in _cases(tmp_path):
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
        code = main(argv)
        out, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert code == 2, (argv, err)
        assert len(lines) == 1 and lines[0].startswith("soma: error: "), (argv, err)
        assert all(w in lines[0] for w in words), (argv, lines[0], words)
        assert out == "", (argv, out)
    assert not (tmp_path / "missing").exists(), "bench report created the folder it was asked to read"

"""One place builds S2 from options: every command takes the same flags and bad specs are one line."""

import pytest

from soma_local.cli.main import build_parser
from soma_local.errors import SomaError
from soma_local.cli.args import UsageError, s2_options
from soma_local.s2.build import S2Options, build_s2, parse_runtime


def test_runtime_specs_parse_and_bad_ones_say_what_is_expected():
    assert parse_runtime("llama_cpp") == ("llama_cpp", [])
    assert parse_runtime("vllm:http://a:1/, https://b:2") == ("vllm", ["http://a:1", "https://b:2"])
    for bad in ("vllm", "vllm:a:1", "tgi:http://a"):
        with pytest.raises(SomaError, match="--s2"):
            parse_runtime(bad)


@pytest.mark.parametrize("argv", [
    ["run"],
    ["bench", "run", "--method", "vanilla", "--benchmark", "gsm8k"],
    ["calibrate"],
])
def test_run_bench_and_calibrate_take_the_same_s2_options(argv, tmp_path):
    template = tmp_path / "t.jinja"
    template.write_text("{{ messages }}")
    flags = ["--s2", "vllm:http://h:1", "--s2-model", "m", "--chat-template", str(template), "--seed", "5",
             "--temperature", "0", "--top-k", "20", "--n-ctx", "1024", "--flash-attn", "--s2-timeout", "9"]
    options = s2_options(build_parser().parse_args(argv + flags))
    assert (options.runtime, options.targets, options.s2_model, options.chat_template) == ("vllm", ["http://h:1"], "m", str(template))
    assert (options.seed, options.temperature, options.top_k, options.n_ctx, options.flash_attn, options.s2_timeout) \
        == (5, 0.0, 20, 1024, True, 9.0)


def test_a_missing_chat_template_file_is_one_clear_error(tmp_path):
    missing = str(tmp_path / "none.jinja")
    with pytest.raises(UsageError, match="--chat-template .*none.jinja: no such file"):
        build_parser().parse_args(["run", "--chat-template", missing])
    with pytest.raises(SomaError, match="--chat-template .*none.jinja"):  # built from code, not the command line
        build_s2(S2Options(chat_template=missing))

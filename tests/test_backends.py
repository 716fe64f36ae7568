"""--backend: auto falls back to the CPU backend with one note line; gpu without a device is one
error line and exit status 2 (the device is hidden here, so this runs alike with or without
one)."""

from __future__ import annotations

from multibin import write_pair

from hspz.cli import main
from hspz.engine import backends


def test_backend_choice_without_a_device(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(backends, "gpu_available", lambda: False)
    ref, qry = write_pair(tmp_path)
    run = ["run", "-r", str(ref), "-q", str(qry), "--backend"]
    assert main([*run, "gpu", "-o", str(tmp_path / "gpu")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["hspZ: --backend gpu: no CUDA device is visible (is CuPy installed?)"]
    assert not (tmp_path / "gpu").exists()
    assert main([*run, "auto", "-o", str(tmp_path / "auto")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err.count("note: no GPU visible; using the CPU backend") == 1
    assert any((tmp_path / "auto").iterdir())

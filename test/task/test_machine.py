"""The machine record kept with each trial and benchmark."""

from getagrip_ros.task.machine import machine


def test_the_cpu_and_any_kernel_override_are_recorded(monkeypatch):
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    here = machine()
    assert here["cpu"] and here["cores"] >= 1 and here["torch_cpu_capability"]
    assert "OPENBLAS_CORETYPE" not in here
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")  # read at record time, as the trial's process sees it
    assert machine()["OPENBLAS_CORETYPE"] == "Haswell"

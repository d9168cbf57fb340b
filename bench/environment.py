"""What a benchmark ran on (device, driver, package versions, date) and CSV output."""

from __future__ import annotations

import csv
import datetime
import os
import platform
import re
from importlib import metadata
from pathlib import Path

RESULTS_DIR = Path(__file__).with_name("results")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def gpu_info() -> dict | None:
    """Name, driver and runtime versions of the current CUDA device, or None."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() == 0:
            return None
        device = cupy.cuda.Device()
        props = cupy.cuda.runtime.getDeviceProperties(device.id)
        name = props["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        driver = cupy.cuda.runtime.driverGetVersion()
        runtime = cupy.cuda.runtime.runtimeGetVersion()
        return {
            "gpu": name,
            "gpu_sms": str(device.attributes["MultiProcessorCount"]),
            "cuda_driver": f"{driver // 1000}.{driver % 1000 // 10}",
            "cuda_runtime": f"{runtime // 1000}.{runtime % 1000 // 10}",
        }
    except Exception:
        return None


def device_kind(gpu: dict | None) -> str:
    """Short slug for file names: 'h100', 'h200', 'a100', ... or 'cpu'."""
    if not gpu:
        return "cpu"
    match = re.search(r"\b([A-Z]\d{2,4}[A-Z]?)\b", gpu["gpu"].upper())
    return match.group(1).lower() if match else re.sub(r"\W+", "_", gpu["gpu"].lower()).strip("_")


def environment(gpu: dict | None) -> dict:
    info = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpu": _cpu_model(),
        "cpu_cores": str(os.cpu_count()),
        "python": platform.python_version(),
        "bpbc": _version("bpbc"),
        "numpy": _version("numpy"),
        "numba": _version("numba"),
        "parasail": _version("parasail"),
        "cupy": next((v for v in (_version(p) for p in ("cupy-cuda12x", "cupy-cuda13x", "cupy"))
                      if v != "absent"), "absent"),
    }
    info.update(gpu or {"gpu": "none"})
    return info


def write_csv(path: Path, rows: list[dict], env: dict) -> Path:
    """Rows as CSV, preceded by '# key: value' comment lines describing ``env``;
    the device columns are repeated on every row so a row stands alone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    columns: list[str] = []
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    extra = ["gpu", "cpu", "cpu_cores", "cuda_driver", "date"]
    columns += [key for key in extra if key not in columns]
    with open(path, "w", newline="") as fh:
        for key, value in env.items():
            fh.write(f"# {key}: {value}\n")
        writer = csv.DictWriter(fh, fieldnames=columns, restval="")
        writer.writeheader()
        for row in rows:
            writer.writerow({**{key: env.get(key, "") for key in extra}, **row})
    return path


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(line for line in fh if not line.startswith("#")))

"""Draw the monitoring guide's picture of the Grafana dashboard from real data: a demo run scraped by Prometheus.

Grafana is in none of the registries this project reaches (not in Debian; PyPI and npm have clients and plugins,
not the server), so this draws each panel of ``monitoring/pycanal-dashboard.json`` itself, from the panel's own
title, queries, legends and unit:

1. starts Debian's ``prometheus`` server (scripts/setup.sh installs it) on a free loopback port, with a temporary
   data directory, scraping every second the two exporters of ``python -m canal.demo --metrics-port P
   --mirror-metrics-port Q``: the Spark source's reader process (capture and source series) and the driver that
   applies the mirror;
2. runs the demo (its reader SIGKILLed part-way, as always: the gap shows), and beside it a balance group for the
   HA row: a ZooKeeper and a MariaDB of their own, and ``canal serve`` processes sharing four destinations -- one
   alone first, a second joining (two destinations handed over), then the first stopped with SIGTERM (its two
   handed over), each process's exporter scraped too;
3. asks Prometheus for each panel's queries over the run (``query_range``, ``$destination`` as ``.*`` and
   ``$__rate_interval`` as ``5s``) and plots them with matplotlib, laid out as the dashboard's ``gridPos`` says.

Run: ``.venv/bin/python scripts/dashboard_png.py [--out docs/images/monitoring-dashboard.png] [--seconds 60]``. It
stops every process it started, by pid.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "monitoring" / "pycanal-dashboard.json"
SCRAPE_S = 1
RATE_WINDOW = "5s"


def free_port() -> int:
    sys.path.insert(0, str(ROOT))
    from canal.testing.services import free_port as pick

    return pick()


def start_prometheus(work: Path, targets: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    """Debian's prometheus scraping ``targets`` every second; the process and its URL."""
    binary = shutil.which("prometheus")
    if binary is None:
        raise SystemExit("prometheus is missing: bash scripts/setup.sh installs Debian's prometheus package")
    port = free_port()
    config = work / "prometheus.yml"
    config.write_text(
        json.dumps(  # JSON is YAML
            {
                "global": {"scrape_interval": f"{SCRAPE_S}s", "evaluation_interval": f"{SCRAPE_S}s"},
                "scrape_configs": [{"job_name": "pycanal-demo", "static_configs": [{"targets": targets}]}],
            }
        )
    )
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(work / "prometheus.log").open("wb"),
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
                if response.status == 200:
                    return process, url
        except OSError:
            time.sleep(0.2)  # polling a server that starts: no event to wait on
    process.kill()
    raise SystemExit(f"prometheus did not start: {(work / 'prometheus.log').read_text()[-2000:]}")


class BalanceGroup:
    """``canal serve`` processes of one balance group on a ZooKeeper and a MariaDB of their own, for the HA row: the
    first starts at once, the second joins after ``join_s`` seconds, the first leaves (SIGTERM) after ``leave_s``."""

    DESTINATIONS = ("ha0", "ha1", "ha2", "ha3")

    def __init__(self, work: Path, ports: list[int], join_s: float, leave_s: float) -> None:
        sys.path.insert(0, str(ROOT))
        from canal.testing.services import MariaDBServer, ZooKeeperServer

        self.work, self.ports, self.join_s, self.leave_s = work, ports, join_s, leave_s
        self.zk, self.mariadb = ZooKeeperServer(), MariaDBServer(server_id=9)
        self.processes: list[subprocess.Popen[bytes]] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> BalanceGroup:
        self.zk.start()
        self.mariadb.start()
        self.mariadb.execute("CREATE DATABASE bal")
        journal, position = self.mariadb.execute("SHOW MASTER STATUS")[0][:2]
        conf = self.work / "conf"
        conf.mkdir()
        (conf / "canal.properties").write_text(
            f"canal.destinations = {', '.join(self.DESTINATIONS)}\ncanal.zkServers = {self.zk.hosts}\n"
        )
        for dest in self.DESTINATIONS:
            self.mariadb.execute(f"CREATE TABLE bal.t_{dest} (id INT PRIMARY KEY)")
            (conf / dest).mkdir()
            (conf / dest / "instance.properties").write_text(
                f"canal.instance.master.address = {self.mariadb.address}\n"
                f"canal.instance.master.journal.name = {journal}\ncanal.instance.master.position = {position}\n"
                f"canal.instance.dbUsername = {self.mariadb.user}\ncanal.instance.dbPassword = ${{CANAL_PASSWORD}}\n"
                f"canal.instance.filter.regex = bal\\\\.t_{dest}\n"
            )
        self.thread.start()
        return self

    def _serve(self, name: str, port: int) -> subprocess.Popen[bytes]:
        canal = Path(sys.executable).parent / "canal"
        command = [str(canal), "serve", str(self.work / "conf"), "--metrics-port", str(port), "--address", name]
        env = {**os.environ, "CANAL_PASSWORD": self.mariadb.password}
        log = (self.work / f"{name}.log").open("wb")
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=log)
        self.processes.append(process)
        return process

    def _run(self) -> None:
        began = time.monotonic()
        first = self._serve("first", self.ports[0])
        rows = 0
        while not self.stopped.wait(0.2):  # rows for each destination, five a second: pacing, not synchronisation
            for dest in self.DESTINATIONS:
                self.mariadb.execute(f"INSERT INTO bal.t_{dest} VALUES ({rows})")
            rows += 1
            elapsed = time.monotonic() - began
            if elapsed >= self.join_s and len(self.processes) == 1:
                self._serve("second", self.ports[1])
            if elapsed >= self.leave_s and first.returncode is None and first.poll() is None:
                first.send_signal(signal.SIGTERM)
                first.wait(60)

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(60)
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.mariadb.stop()
        self.zk.stop()


def query_range(url: str, expr: str, start: float, end: float) -> list[dict[str, Any]]:
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": SCRAPE_S})
    with urllib.request.urlopen(f"{url}/api/v1/query_range?{params}", timeout=30) as response:
        answer = json.load(response)
    if answer.get("status") != "success":
        raise SystemExit(f"{expr}: {answer}")
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def legend(template: str, labels: dict[str, str]) -> str:
    out = template
    for name, value in labels.items():
        out = out.replace("{{" + name + "}}", value)
    return out.replace("/tmp/", "").strip() or "value"


def draw(dashboard: dict[str, Any], url: str, start: float, end: float, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dashboard["panels"])
    fig = plt.figure(figsize=(16, height * 0.36), dpi=72)
    grid = fig.add_gridspec(height, 24, hspace=0.9, wspace=2.5, top=0.96, bottom=0.01, left=0.04, right=0.97)
    fig.suptitle(
        f"{dashboard['title']}: the dashboard's panels over a demo run scraped by Prometheus "
        "(scripts/dashboard_png.py)",
        fontsize=12,
    )
    answers = {  # every panel's series, asked for before drawing: the run's first sample starts every time axis
        (panel["id"], target["refId"]): query_range(
            url, target["expr"].replace("$destination", ".*").replace("$__rate_interval", RATE_WINDOW), start, end
        )
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    }
    first = min((float(s["values"][0][0]) for found in answers.values() for s in found if s["values"]), default=start)
    span = end - first
    for panel in dashboard["panels"]:
        g = panel["gridPos"]
        if panel["type"] == "row":
            ax = fig.add_subplot(grid[g["y"], :])
            ax.axis("off")
            ax.text(0, 0.5, panel["title"], fontsize=10, weight="bold", transform=ax.transAxes)
            continue
        ax = fig.add_subplot(grid[g["y"] + 1 : g["y"] + g["h"] - 1, g["x"] : g["x"] + g["w"]])
        ax.set_title(panel["title"], fontsize=9, loc="left")
        defaults = panel["fieldConfig"]["defaults"]
        right = {  # the targets a field override puts on a right axis (Grafana's custom.axisPlacement)
            o["matcher"]["options"]: next((p["value"] for p in o["properties"] if p["id"] == "unit"), "")
            for o in panel["fieldConfig"].get("overrides", [])
            if any(p["id"] == "custom.axisPlacement" and p["value"] == "right" for p in o["properties"])
        }
        twin = ax.twinx() if right else None
        lines: list[Any] = []
        for target in panel["targets"]:
            on = twin if twin is not None and target["refId"] in right else ax
            for series in answers[(panel["id"], target["refId"])]:
                times = [float(t) - first for t, _ in series["values"]]
                values = [float(v) for _, v in series["values"]]
                label = legend(target["legendFormat"], series["metric"])
                color = f"C{len(lines) % 10}"
                if panel["type"] == "stat":
                    lines += on.step(times, values, where="post", label=label, color=color)
                    if "canal_instance_running" in target["expr"]:
                        on.set_ylim(-0.1, 1.1)
                        on.set_yticks([0, 1], ["stopped", "running"])
                    else:  # a count
                        on.set_ylim(-0.1, max(1.0, *values) + 0.5)
                        on.yaxis.get_major_locator().set_params(integer=True)
                else:
                    lines += on.plot(times, values, label=label, linewidth=1.2, color=color)
        if defaults.get("unit") not in (None, "", "none", "short") and panel["type"] != "stat":
            ax.set_ylabel(defaults["unit"], fontsize=7)
        if twin is not None:
            twin.tick_params(labelsize=7)
            twin.set_ylabel(", ".join(sorted(set(right.values()))), fontsize=7)
        ax.set_xlim(0, span)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("s since the first sample", fontsize=7, labelpad=1)
        if lines:
            ax.legend(lines, [line.get_label() for line in lines], fontsize=6, loc="upper left")
        else:
            ax.text(0.5, 0.5, "no data in this run", ha="center", va="center", transform=ax.transAxes, fontsize=8)
    out.parent.mkdir(parents=True, exist_ok=True)
    drawn = out.with_suffix(".full.png")
    fig.savefig(drawn, dpi=72)
    plt.close(fig)
    small(drawn, out)
    drawn.unlink()


def small(drawn: Path, out: Path) -> None:
    """``drawn`` saved to ``out`` with a palette of matplotlib's ten line colours and greys (a third of the bytes;
    every line keeps its colour)."""
    from matplotlib import colors
    from PIL import Image

    lines = [tuple(round(255 * c) for c in colors.to_rgb(f"C{i}")) for i in range(10)]
    greys = [(v, v, v) for v in range(0, 256, 8)] + [(255, 255, 255)]
    palette = Image.new("P", (1, 1))
    palette.putpalette([channel for rgb in lines + greys for channel in rgb])
    with Image.open(drawn) as image:
        image.convert("RGB").quantize(palette=palette, dither=Image.Dither.NONE).save(out, optimize=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "monitoring-dashboard.png")
    parser.add_argument("--seconds", type=float, default=60.0, help="the demo's workload duration")
    parser.add_argument("--preload", type=int, default=50_000, help="rows before the pipeline starts")
    args = parser.parse_args(argv)
    dashboard = json.loads(DASHBOARD.read_text())
    port, mirror_port = free_port(), free_port()
    ha_ports = [free_port(), free_port()]
    with tempfile.TemporaryDirectory(prefix="pycanal-dashboard-") as tmp:
        work = Path(tmp)
        targets = [f"127.0.0.1:{p}" for p in (port, mirror_port, *ha_ports)]
        prometheus, url = start_prometheus(work, targets)
        try:
            start = time.time()
            group = BalanceGroup(work, ha_ports, join_s=args.seconds * 0.3, leave_s=args.seconds * 0.65)
            with group:
                demo = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "canal.demo",
                        "--seconds",
                        str(args.seconds),
                        "--preload",
                        str(args.preload),
                        "--metrics-port",
                        str(port),
                        "--mirror-metrics-port",
                        str(mirror_port),
                    ],
                    cwd=ROOT,
                    env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
                    check=False,
                )
            end = time.time()
            if demo.returncode != 0:
                print(f"the demo exited with {demo.returncode}", file=sys.stderr)
                return demo.returncode
            draw(dashboard, url, start, end, args.out)
        finally:
            prometheus.terminate()
            try:
                prometheus.wait(timeout=30)
            except subprocess.TimeoutExpired:
                prometheus.kill()
                prometheus.wait()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

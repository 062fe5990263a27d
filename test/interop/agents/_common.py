"""Shared pieces of the awp-python scenario agents: arguments, a connection that records what it
receives, an abrupt connection loss, and the JSON result line."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from awp import ClientConnection, FrameReceived, ProtocolViolation
from awp.aio import AsyncClient

AGENT = {"name": "awp-edge-interop", "version": "0.1.0", "vendor": "awp-edge"}
MODALITIES = ["proprio/json", "text/event+json"]
ARM = "arm_01"
CHANNELS = ["proprio", "arm_state"]
SEQUENCED = ("action.status", "world.event", "session.state")


def parse_args(description: str, extra: Any = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--url", default=os.environ.get("AWP_URL"), help="world or edge URL ($AWP_URL)")
    p.add_argument("--token", default=os.environ.get("AWP_TOKEN"), help="bearer token ($AWP_TOKEN)")
    p.add_argument("--timeout-s", type=float, default=60.0, help="bound on the whole scenario")
    if extra is not None:
        extra(p)
    args = p.parse_args()
    if not args.url:
        p.error("--url or $AWP_URL is required")
    return args


def pose(p: tuple[float, float, float]) -> dict[str, Any]:
    return {"frame": "base", "p_m": list(p), "q": [0, 0, 0, 1]}


@dataclass
class Received:
    """One message from the world, as far as sequencing goes."""

    generation: int  # which connection of this client carried it (1, 2, ...)
    kind: str  # notification | result | frame
    method: str
    status_seq: int | None
    what: str  # action_id:state, event name, or session state


class RecordingConnection(ClientConnection):
    """A ClientConnection that keeps a log of every sequenced message and every frame it is fed,
    per connection generation, and every ProtocolViolation the SDK reports."""

    def __init__(self) -> None:
        super().__init__(AGENT, MODALITIES)
        self.generation = 1
        self.log: list[Received] = []
        self.violations: list[str] = []
        self.frame_log: list[tuple[int, str, int]] = []  # (generation, binding, channel_id)
        self.payloads: list[tuple[int, str, dict[str, Any]]] = []  # (generation, channel, body)
        self.events: list[tuple[int, str, dict[str, Any]]] = []  # (generation, event, detail)

    def receive(self, msg: dict[str, Any]) -> list[Any]:
        method = msg.get("method")
        params = msg.get("params") or {}
        if method == "world.event":
            self.events.append((self.generation, str(params.get("event")), dict(params.get("detail") or {})))
        if method in SEQUENCED:
            self.log.append(
                Received(self.generation, "notification", method, params.get("status_seq"), _what(method, params))
            )
        elif method == "obs.frame":
            self.frame_log.append((self.generation, "inline", int(params.get("channel_id", 0))))
        elif "result" in msg and isinstance(msg["result"], dict) and "status_seq" in msg["result"]:
            res = msg["result"]
            self.log.append(Received(self.generation, "result", "result", res["status_seq"], _what("action.status", res)))
        events = super().receive(msg)
        self._note(events)
        return events

    def receive_frame(self, data: bytes) -> list[Any]:
        events = super().receive_frame(data)
        for e in events:
            if isinstance(e, FrameReceived):
                self.frame_log.append((self.generation, "stream", e.frame.channel_id))
        self._note(events)
        return events

    def _note(self, events: list[Any]) -> None:
        for e in events:
            if isinstance(e, ProtocolViolation):
                self.violations.append(e.detail)
            elif isinstance(e, FrameReceived):
                try:
                    body = json.loads(e.frame.payload)
                except (ValueError, UnicodeDecodeError):
                    continue
                self.payloads.append((self.generation, e.channel, body))

    def seqs(self, generation: int) -> list[int]:
        return [r.status_seq for r in self.log if r.generation == generation and r.status_seq is not None]

    def frame_count(
        self, generation: int | None = None, binding: str | None = None, channel: int | None = None
    ) -> int:
        return sum(
            1
            for g, b, c in self.frame_log
            if (generation is None or g == generation)
            and (binding is None or b == binding)
            and (channel is None or c == channel)
        )

    def frames_by_binding(self, generation: int | None = None) -> dict[str, int]:
        out: dict[str, int] = {}
        for g, b, _ in self.frame_log:
            if generation is None or g == generation:
                out[b] = out.get(b, 0) + 1
        return out


def _what(method: str, p: dict[str, Any]) -> str:
    if method == "action.status":
        return f"{p.get('action_id')}:{p.get('state')}" + (f"({p['reason']})" if p.get("reason") else "")
    if method == "world.event":
        return f"event:{p.get('event')}"
    return f"session:{p.get('state')}" + (f"({p['reason']})" if p.get("reason") else "")


def crash(client: AsyncClient) -> None:
    """Lose the connection abruptly, as a crashed agent or a cut cable would: no close handshake.
    awp-python offers no public call for this, so the sockets' transports are aborted directly."""
    for ws in (client._ws, client._stream_ws):  # noqa: SLF001 - no public API for an abrupt loss
        if ws is not None:
            ws.transport.abort()


async def wait_until(predicate: Any, timeout_s: float, step_s: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(step_s)
    return bool(predicate())


async def settle(
    client: AsyncClient, conn: ClientConnection, action_id: str, lockstep: bool, timeout_s: float = 15.0
) -> Any:
    """Wait for `action_id` to reach a terminal state, advancing time in lockstep."""
    deadline = time.monotonic() + timeout_s
    if lockstep:
        while not conn.actions[action_id].terminal and time.monotonic() < deadline:
            await client.advance(5)
    else:
        with contextlib.suppress(TimeoutError):
            await client.wait_terminal(action_id, timeout_s)
    return conn.actions[action_id]


@dataclass
class Checks:
    items: list[dict[str, Any]] = field(default_factory=list)

    def check(self, name: str, ok: bool, detail: Any = None) -> bool:
        entry: dict[str, Any] = {"check": name, "ok": bool(ok)}
        if detail is not None:
            entry["detail"] = detail
        self.items.append(entry)
        return bool(ok)

    @property
    def ok(self) -> bool:
        return bool(self.items) and all(i["ok"] for i in self.items)

    def failed(self) -> list[str]:
        return [i["check"] for i in self.items if not i["ok"]]


def replay_check(checks: Checks, conn: RecordingConnection, ack: int, replay_to: int, gen: int, who: str) -> list[int]:
    """AWP-CTL-008/010: after resuming from `ack`, every status_seq in (ack, replay_to] arrives on
    the new connection exactly once, in order, before anything newer; none at or below `ack`."""
    got = conn.seqs(gen)
    replayed = [s for s in got if s <= replay_to]
    checks.check(
        f"{who}: replay is exactly status_seq {ack + 1}..{replay_to}, once each, in order",
        replayed == list(range(ack + 1, replay_to + 1)),
        {"ack": ack, "replay_to": replay_to, "received": got[:50]},
    )
    first_new = next((i for i, s in enumerate(got) if s > replay_to), len(got))
    checks.check(
        f"{who}: the replay precedes every newer status_seq",
        all(s <= replay_to for s in got[:first_new]) and all(s > replay_to for s in got[first_new:]),
        got[:50],
    )
    everything = conn.seqs(gen - 1) + got
    dupes = sorted({s for s in everything if everything.count(s) > 1})
    checks.check(f"{who}: no status_seq delivered twice across the reconnect", not dupes, dupes)
    return replayed


def emit(result: dict[str, Any]) -> int:
    print(json.dumps(result, separators=(",", ":")), flush=True)
    return 0 if result.get("ok") else 1


def run(main: Any, args: argparse.Namespace, scenario: str) -> int:
    """Run `main(args, checks, out)` within the scenario's time bound and print one JSON line."""
    checks = Checks()
    out: dict[str, Any] = {"scenario": scenario, "url": args.url}
    started = time.monotonic()
    try:
        asyncio.run(asyncio.wait_for(main(args, checks, out), args.timeout_s))
    except TimeoutError:
        checks.check("finished within the time bound", False, f"{args.timeout_s} s")
    except Exception as exc:  # report, do not hide: the JSON line carries it
        checks.check("ran without an exception", False, f"{type(exc).__name__}: {exc}")
    out["duration_ms"] = round((time.monotonic() - started) * 1000)
    out["ok"] = checks.ok
    out["failed"] = checks.failed()
    out["checks"] = checks.items
    return emit(out)


if __name__ == "__main__":  # pragma: no cover - a library module
    sys.exit("import this module from a scenario script")

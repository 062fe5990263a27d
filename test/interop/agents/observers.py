"""Observer sessions, written with awp-python: several sessions open without an embodiment and
receive frames and world events while another session moves the arm, resets the world and (given
the world's pid) has the operator e-stop engaged and released. One observer loses its connection
meanwhile, resumes, and receives what it missed exactly once, in order.

Prints one JSON line (`ok`, `checks`, ...) and exits 1 if any check failed.

    python observers.py --url ws://127.0.0.1:8710 --token TOKEN [--world-pid PID]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from typing import Any

from _common import (
    ARM,
    CHANNELS,
    Checks,
    RecordingConnection,
    crash,
    parse_args,
    pose,
    replay_check,
    run,
    settle,
    wait_until,
)
from awp.aio import AsyncClient

TARGET = (0.2, -0.15, 0.5)


def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--observers", type=int, default=3, help="observer sessions (at least 2)")
    p.add_argument("--away-ms", type=float, default=1000.0, help="how long the roaming observer is gone")
    p.add_argument(
        "--world-pid",
        type=int,
        default=int(os.environ["AWP_SIM_PID"]) if os.environ.get("AWP_SIM_PID") else None,
        help="awp-sim's pid, to engage and release the operator e-stop ($AWP_SIM_PID)",
    )


def _events(conn: RecordingConnection, generation: int) -> list[str]:
    return [name for g, name, _ in conn.events if g == generation]


async def scenario(args: argparse.Namespace, checks: Checks, out: dict[str, Any]) -> None:
    n = max(2, args.observers)
    observers = [RecordingConnection() for _ in range(n)]
    clients = [AsyncClient(c, args.url, token=args.token) for c in observers]
    actor_conn = RecordingConnection()
    actor = AsyncClient(actor_conn, args.url, token=args.token)
    try:
        await _scenario(args, checks, out, observers, clients, actor_conn, actor)
    finally:
        for c in [*clients, actor]:
            await c.aclose()


async def _scenario(
    args: argparse.Namespace,
    checks: Checks,
    out: dict[str, Any],
    observers: list[RecordingConnection],
    clients: list[AsyncClient],
    actor_conn: RecordingConnection,
    actor: AsyncClient,
) -> None:
    for c in [*clients, actor]:
        await c.connect()
    manifests = [await c.initialize() for c in [*clients, actor]]
    mode = manifests[0]["time_models"][0]
    lockstep = mode == "lockstep"
    out["mode"] = mode
    ready = [await c.open_session(mode, subscribe=CHANNELS) for c in clients]
    ids = [r["session_id"] for r in ready]
    out["stream_urls"] = sorted({e["url"] for r in ready for e in r.get("stream_endpoints", []) if e.get("url")})
    out["observer_sessions"] = ids
    checks.check("every observer session has its own session_id", len(set(ids)) == len(ids), ids)
    checks.check(
        "observer sessions are granted no action types",
        all(not r["granted"]["action_types"] for r in ready),
        [r["granted"]["action_types"] for r in ready],
    )
    actor_ready = await actor.open_session(mode, embodiment=ARM, subscribe=CHANNELS, admin=["reset"])
    actor_id = actor_ready["session_id"]
    out["actor_session"] = actor_id
    checks.check("the acting session holds the reset grant", "reset" in actor_ready["granted"]["admin"])

    def every_channel(conn: RecordingConnection, generation: int) -> bool:
        chans = conn.channels
        return all(conn.frame_count(generation, channel=chans[c]) > 0 for c in CHANNELS if c in chans)

    if lockstep:
        await actor.advance()
    flowing = await wait_until(lambda: all(every_channel(o, 1) for o in observers), 3.0)
    checks.check("every observer receives frames on every channel", flowing, [o.frames_by_binding(1) for o in observers])

    # The actor moves the arm; every observer sees it move on arm_state.
    rec = await actor.submit("move_to_pose", {"pose": pose(TARGET)})
    done = await settle(actor, actor_conn, rec.action_id, lockstep)
    checks.check("the actor's move completed", done.state.value == "completed", done.status)

    def saw_move(conn: RecordingConnection) -> bool:
        return any(ch == "arm_state" and body.get("action_id") == rec.action_id for _, ch, body in conn.payloads)

    seen = await wait_until(lambda: all(saw_move(o) for o in observers), 3.0)
    checks.check("every observer saw the actor's move on arm_state", seen, [saw_move(o) for o in observers])

    # One observer roams: it drops, misses a reset and an e-stop, and resumes.
    roamer, roamer_client = observers[0], clients[0]
    stayers = observers[1:]
    crash(roamer_client)
    dropped = time.monotonic()
    await wait_until(lambda: not roamer_client.connected, 2.0)
    ack = roamer.last_status_seq
    await actor.call(actor_conn.reset("home"))
    expected = ["world_resetting"]
    told = await wait_until(lambda: all("world_resetting" in _events(o, 1) for o in stayers), 3.0)
    checks.check("every connected observer was told world_resetting", told, [_events(o, 1) for o in stayers])
    initiators = [d.get("initiator") for o in stayers for g, e, d in o.events if e == "world_resetting"]
    checks.check("world_resetting names the actor's session", initiators and all(i == actor_id for i in initiators), initiators)
    if args.world_pid is not None:
        os.kill(args.world_pid, signal.SIGUSR1)
        engaged = await wait_until(lambda: all("e_stop_engaged" in _events(o, 1) for o in stayers), 3.0)
        os.kill(args.world_pid, signal.SIGUSR2)
        released = await wait_until(lambda: all("e_stop_released" in _events(o, 1) for o in stayers), 3.0)
        checks.check("every connected observer was told e_stop_engaged and e_stop_released", engaged and released)
        expected += ["e_stop_engaged", "e_stop_released"]
    out["events_expected_in_replay"] = expected
    await asyncio.sleep(max(0.0, args.away_ms / 1000 - (time.monotonic() - dropped)))
    roamer.generation = 2
    resumed = await roamer_client.reconnect()
    replay_to = resumed.get("replay_to_status_seq")
    out["roamer"] = {"session_id": ids[0], "ack": ack, "replay_to": replay_to}
    if not checks.check("the roaming observer resumed", isinstance(replay_to, int), sorted(resumed)):
        return
    checks.check("the roamer kept its session id", resumed.get("session_id") == ids[0], resumed.get("session_id"))
    await wait_until(lambda: roamer.last_status_seq >= replay_to, 3.0)
    replay_check(checks, roamer, ack, replay_to, 2, "roamer")
    replayed = [r.what for r in roamer.log if r.generation == 2 and r.status_seq is not None and ack < r.status_seq <= replay_to]
    out["roamer"]["replayed"] = replayed
    checks.check("the roamer's replay holds session.state suspended", any(w.startswith("session:suspended") for w in replayed), replayed)
    missing = [e for e in expected if f"event:{e}" not in replayed]
    checks.check("the roamer's replay holds every event it missed", not missing, {"missing": missing, "replayed": replayed})
    if lockstep:
        await actor.advance()
    back = await wait_until(lambda: every_channel(roamer, 2), 3.0)
    checks.check("the roamer receives frames again on every channel", back, roamer.frames_by_binding(2))

    for c in [*clients, actor]:
        await c.close_session()
    closed = [c.session_state for c in [*observers, actor_conn]]
    checks.check("every session closed", all(s == "closed" for s in closed), closed)
    violations = [v for c in [*observers, actor_conn] for v in c.violations]
    checks.check("awp-python saw no protocol violation", not violations, violations[:5])
    out["frames"] = [o.frames_by_binding() for o in observers]
    out["events"] = [[f"{g}:{e}" for g, e, _ in o.events] for o in observers]


if __name__ == "__main__":
    sys.exit(run(scenario, parse_args(__doc__.splitlines()[0], _options), "observers"))

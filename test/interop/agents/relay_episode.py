"""Relay episode, written with awp-python: connect, initialize, open a session on the arm, submit a
move and watch its statuses, lose the connection abruptly mid-action, reconnect and resume from the
last acknowledged status_seq, check the replay, act again, and close.

Prints one JSON line (`ok`, `checks`, ...) and exits 1 if any check failed.

    python relay_episode.py --url ws://127.0.0.1:8710 --token TOKEN
"""

from __future__ import annotations

import argparse
import asyncio
import sys
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

FIRST_TARGET = (0.25, 0.1, 0.45)
SECOND_TARGET = (0.0, 0.0, 0.4)


def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--velocity", type=float, default=0.05, help="m/s of the interrupted move")
    p.add_argument(
        "--away-ms",
        type=float,
        help="time without a connection (default: past the watchdog in streaming, 300 ms in lockstep)",
    )


async def episode(args: argparse.Namespace, checks: Checks, out: dict[str, Any]) -> None:
    conn = RecordingConnection()
    client = AsyncClient(conn, args.url, token=args.token)
    await client.connect()
    try:
        await _episode(args, checks, out, conn, client)
    finally:
        await client.aclose()


async def _episode(
    args: argparse.Namespace,
    checks: Checks,
    out: dict[str, Any],
    conn: RecordingConnection,
    client: AsyncClient,
) -> None:
    manifest = await client.initialize()
    mode = manifest["time_models"][0]
    lockstep = mode == "lockstep"
    out["mode"] = mode
    ready = await client.open_session(mode, embodiment=ARM, subscribe=CHANNELS)
    out["session_id"] = ready["session_id"]
    bindings = [e.get("binding") for e in ready.get("stream_endpoints", [])]
    out["stream_endpoints"] = bindings
    out["stream_urls"] = [e["url"] for e in ready.get("stream_endpoints", []) if e.get("url")]
    streamed = "ws" in bindings
    ids = conn.channels
    checks.check("session.open granted proprio and arm_state", set(CHANNELS) <= set(ids), sorted(ids))
    first = await wait_until(lambda: all(conn.frame_count(1, channel=ids[c]) for c in CHANNELS if c in ids), 3.0)
    checks.check("frames arrived on every channel after session.open", first, conn.frames_by_binding(1))

    # Act: a slow move, so that it is still executing when the connection drops.
    rec = await client.submit("move_to_pose", {"pose": pose(FIRST_TARGET), "max_velocity_mps": args.velocity})
    action_id = rec.action_id
    out["action_id"] = action_id
    if lockstep:
        await client.advance()
    executing = await wait_until(lambda: conn.actions[action_id].state.value == "executing", 3.0)
    checks.check("the move began executing", executing, conn.actions[action_id].state.value)
    if lockstep:
        for _ in range(3):
            await client.advance()
    else:
        await asyncio.sleep(0.4)
    seen = [r.what for r in conn.log if r.generation == 1 and r.what.startswith(action_id)]
    out["statuses_before_drop"] = seen
    checks.check("statuses observed before the drop", len(seen) >= 2, seen)
    if streamed:
        checks.check(
            "frames arrived on the ws stream connection before the drop",
            conn.frame_count(1, binding="stream") > 0,
            conn.frames_by_binding(1),
        )

    # Drop the connection mid-action, stay away, then reconnect and resume.
    crash(client)
    await wait_until(lambda: not client.connected, 2.0)
    ack = conn.last_status_seq
    watchdog = ((manifest.get("safety_policy") or {}).get("safe_state") or {}).get("watchdog_ms")
    if args.away_ms is not None:
        away_ms = args.away_ms
    elif not lockstep and watchdog is not None:
        away_ms = watchdog + 600  # past the watchdog: the world safe-stops the arm meanwhile
    else:
        away_ms = 300.0
    out["away_ms"] = away_ms
    await asyncio.sleep(away_ms / 1000)
    conn.generation = 2
    resumed = await client.reconnect()
    replay_to = resumed.get("replay_to_status_seq")
    out["ack"] = ack
    out["replay_to"] = replay_to
    if not checks.check("session.resume returned replay_to_status_seq", isinstance(replay_to, int), sorted(resumed)):
        return
    checks.check(
        "session.resume kept the session id",
        resumed.get("session_id") == ready["session_id"],
        resumed.get("session_id"),
    )
    await wait_until(lambda: conn.last_status_seq >= replay_to, 3.0)
    replay_check(checks, conn, ack, replay_to, 2, "agent")
    replayed = [r.what for r in conn.log if r.generation == 2 and r.status_seq is not None and ack < r.status_seq <= replay_to]
    out["replayed"] = replayed
    checks.check("the replay holds session.state suspended", any(w.startswith("session:suspended") for w in replayed), replayed)
    if lockstep:
        checks.check(
            "the interrupted move is still executing (lockstep has no watchdog)",
            conn.actions[action_id].state.value == "executing",
            conn.actions[action_id].status,
        )
        await client.cancel(action_id)
        done = await settle(client, conn, action_id, lockstep)
        checks.check("the interrupted move was cancelled after the resume", done.state.value == "cancelled", done.status)
    else:
        checks.check("session.resume reports safe_state", resumed.get("safe_state") is True, resumed.get("safe_state"))
        done = conn.actions[action_id]
        checks.check(
            "the interrupted move failed by the watchdog's safe stop",
            (done.state.value, done.reason) == ("failed", "connection_lost"),
            done.status,
        )
        checks.check("safe_state_entered was replayed", "event:safe_state_entered" in replayed, replayed)

    # Frames flow again, on the stream connection when the world offers one.
    if lockstep:
        await client.advance()
    again = await wait_until(lambda: all(conn.frame_count(2, channel=ids[c]) for c in CHANNELS if c in ids), 3.0)
    checks.check("frames arrived on every channel after the resume", again, conn.frames_by_binding(2))
    if streamed:
        on_stream = await wait_until(lambda: conn.frame_count(2, binding="stream") > 0, 3.0)
        checks.check("frames arrived on a new ws stream connection after the resume", on_stream, conn.frames_by_binding(2))

    # Act again: a new intent ends the safe state (streaming), and the move completes.
    rec2 = await client.submit("move_to_pose", {"pose": pose(SECOND_TARGET)})
    final = await settle(client, conn, rec2.action_id, lockstep)
    checks.check("a new move after the resume completed", final.state.value == "completed", final.status)
    if not lockstep:
        exited = any(r.what == "event:safe_state_exited" for r in conn.log if r.generation == 2)
        checks.check("safe_state_exited once the new move executed", exited)
    await client.close_session()
    checks.check("session.close closed the session", conn.session_state == "closed", conn.session_state)
    checks.check("awp-python saw no protocol violation", not conn.violations, conn.violations[:5])
    out["status_log"] = [[r.generation, r.status_seq, r.what] for r in conn.log]
    out["frames"] = {"before_drop": conn.frames_by_binding(1), "after_resume": conn.frames_by_binding(2)}


if __name__ == "__main__":
    sys.exit(run(episode, parse_args(__doc__.splitlines()[0], _options), "relay-episode"))

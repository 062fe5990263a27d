/**
 * Consistency checks on a play script: does the prefix reach exactly the state the continuation's `given`
 * describes, and would a grant-checking proxy accept every agent message given the manifest and grants?
 */
import type { Json, JsonObject, PlayScript, TraceEntry, TraceMessage } from './trace-types.js';
import { describeEntry, isJsonObject } from './trace-types.js';
import { diffJson } from './json-diff.js';
import {
  idOf,
  isSessionReadyResult,
  methodOf,
  paramsOf,
  resultOf,
  statusSeqOf,
  stringField,
} from './message-view.js';

function messages(entries: readonly TraceEntry[]): TraceMessage[] {
  return entries.filter((e): e is TraceMessage => e.kind === 'message');
}

/** The manifest (initialize result) and the latest session.ready result among the entries. */
export function sessionContext(entries: readonly TraceEntry[]): {
  manifest?: JsonObject;
  ready?: JsonObject;
} {
  const initializeIds = new Set<Json>();
  let manifest: JsonObject | undefined;
  let ready: JsonObject | undefined;
  for (const e of messages(entries)) {
    if (e.from === 'agent' && methodOf(e.msg) === 'initialize') initializeIds.add(idOf(e.msg) ?? null);
    if (e.from !== 'world' || methodOf(e.msg) !== undefined) continue;
    const result = resultOf(e.msg);
    if (result === undefined) continue;
    if (initializeIds.has(idOf(e.msg) ?? null)) manifest = result;
    if (isSessionReadyResult(e.msg)) ready = result;
  }
  return { manifest, ready };
}

/** Checks the prefix against the first body marker's `given`; every key of `given` is checked or reported. */
export function checkPrefixAgainstGiven(script: PlayScript): string[] {
  const first = script.body[0];
  const given = first?.kind === 'marker' ? first.given : undefined;
  if (given === undefined) return [];
  const out: string[] = [];
  const prefix = messages(script.prefix);
  const { manifest, ready } = sessionContext(script.prefix);
  let lastSeq = 0;
  const actions = new Map<string, { state: string; status_seq: number }>();
  for (const e of prefix) {
    const seq = statusSeqOf(e.msg);
    if (e.from !== 'world' || seq === undefined) continue;
    lastSeq = Math.max(lastSeq, seq);
    const body = paramsOf(e.msg) ?? resultOf(e.msg);
    const id = stringField(body, 'action_id');
    const state = stringField(body, 'state');
    if (id !== undefined && state !== undefined && methodOf(e.msg) !== 'session.state') {
      actions.set(id, { state, status_seq: seq });
    }
  }
  for (const [key, value] of Object.entries(given)) {
    switch (key) {
      case 'status_seq':
        if (value !== lastSeq)
          out.push(`given.status_seq is ${JSON.stringify(value)}, the prefix ends at ${lastSeq}`);
        break;
      case 'actions':
        out.push(...checkActions(value, actions, prefix));
        break;
      case 'channels':
        out.push(...checkChannels(value, manifest, ready));
        break;
      case 'watchdog_ms': {
        const policy = manifest?.safety_policy;
        const safe = isJsonObject(policy) ? policy.safe_state : undefined;
        const actual = isJsonObject(safe) ? safe.watchdog_ms : undefined;
        if (actual !== value)
          out.push(`given.watchdog_ms ${JSON.stringify(value)} != manifest ${JSON.stringify(actual)}`);
        break;
      }
      default:
        out.push(`given.${key} is not checked by the harness`);
    }
  }
  return out;
}

function checkActions(
  value: Json,
  actions: Map<string, { state: string; status_seq: number }>,
  prefix: TraceMessage[],
): string[] {
  if (!isJsonObject(value)) return ['given.actions is not an object'];
  const out: string[] = [];
  for (const [id, want] of Object.entries(value)) {
    if (!isJsonObject(want)) {
      out.push(`given.actions.${id} is not an object`);
      continue;
    }
    const have = actions.get(id);
    if (have === undefined) {
      out.push(`given.actions.${id}: the prefix never reports ${id}`);
      continue;
    }
    if (want.state !== have.state || want.status_seq !== have.status_seq) {
      out.push(
        `given.actions.${id}: ${JSON.stringify(want)} but the prefix leaves it ${JSON.stringify(have)}`,
      );
    }
    if (want.content !== undefined) {
      const submit = prefix.find(
        (e) => e.from === 'agent' && methodOf(e.msg) === 'action.submit' && paramsOf(e.msg)?.action_id === id,
      );
      const params = submit === undefined ? undefined : paramsOf(submit.msg);
      if (params === undefined) out.push(`given.actions.${id}.content: no submission of ${id} in the prefix`);
      else out.push(...diffJson(want.content, params, `given.actions.${id}.content`));
    }
    for (const key of Object.keys(want)) {
      if (!['state', 'status_seq', 'content'].includes(key))
        out.push(`given.actions.${id}.${key} is not checked`);
    }
  }
  return out;
}

function checkChannels(
  value: Json,
  manifest: JsonObject | undefined,
  ready: JsonObject | undefined,
): string[] {
  if (!isJsonObject(value)) return ['given.channels is not an object'];
  const granted = isJsonObject(ready?.granted) ? ready.granted.channels : undefined;
  const declared = manifest?.observation_channels;
  const out: string[] = [];
  for (const [channelId, lossClass] of Object.entries(value)) {
    const grant = Array.isArray(granted)
      ? granted.find((g) => isJsonObject(g) && JSON.stringify(g.channel_id) === channelId)
      : undefined;
    const name = isJsonObject(grant) ? grant.channel : undefined;
    const decl = Array.isArray(declared) ? declared.find((d) => isJsonObject(d) && d.id === name) : undefined;
    const actual = isJsonObject(decl) ? decl.loss_class : undefined;
    if (actual !== lossClass) {
      out.push(
        `given.channels.${channelId}: ${JSON.stringify(lossClass)}, prefix grants ${JSON.stringify(actual)}`,
      );
    }
  }
  return out;
}

/**
 * Checks every agent message of the script against the manifest and grants in force when it is sent:
 * submitted types are declared, on the embodiment and granted, with a declared preemption policy; world.tick
 * needs the tick admin grant; frames use granted channel ids.
 */
export function checkGrantsCover(script: PlayScript): string[] {
  const out: string[] = [];
  const seen: TraceEntry[] = [];
  for (const entry of script.entries) {
    seen.push(entry);
    if (entry.kind !== 'message') continue;
    const method = methodOf(entry.msg);
    const { manifest, ready } = sessionContext(seen);
    const granted = isJsonObject(ready?.granted) ? ready.granted : undefined;
    const fail = (why: string): void => void out.push(`${describeEntry(entry)}: ${why}`);
    if (entry.from === 'agent' && method === 'action.submit') {
      const params = paramsOf(entry.msg);
      const type = stringField(params, 'type');
      const schemas = Array.isArray(manifest?.action_schemas) ? manifest.action_schemas : [];
      const schema = schemas.find((s) => isJsonObject(s) && s.type === type);
      const embodiments = Array.isArray(manifest?.embodiments) ? manifest.embodiments : [];
      const onEmbodiment = embodiments.some(
        (e) => isJsonObject(e) && Array.isArray(e.action_types) && e.action_types.includes(type ?? null),
      );
      const grantedTypes = Array.isArray(granted?.action_types) ? granted.action_types : [];
      if (!isJsonObject(schema)) fail(`type ${JSON.stringify(type)} has no action schema in the manifest`);
      if (!onEmbodiment) fail(`type ${JSON.stringify(type)} is on no embodiment`);
      if (!grantedTypes.includes(type ?? null)) fail(`type ${JSON.stringify(type)} is not granted`);
      const preempt = params?.preempt;
      if (preempt !== undefined && isJsonObject(schema)) {
        const allowed = Array.isArray(schema.preemption) ? schema.preemption : [schema.preemption ?? null];
        if (!allowed.includes(preempt))
          fail(`preempt ${JSON.stringify(preempt)} is not declared for ${type}`);
      }
    }
    if (entry.from === 'agent' && method === 'world.tick') {
      const admin = Array.isArray(granted?.admin) ? granted.admin : [];
      if (!admin.includes('tick')) fail('world.tick without the tick admin grant');
    }
    if (method === 'obs.frame' || method === 'cmd.frame') {
      const channelId = paramsOf(entry.msg)?.channel_id;
      const channels = Array.isArray(granted?.channels) ? granted.channels : [];
      if (!channels.some((c) => isJsonObject(c) && c.channel_id === channelId)) {
        fail(`channel_id ${JSON.stringify(channelId)} is not granted`);
      }
    }
  }
  return out;
}

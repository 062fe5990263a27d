/**
 * A hub's upstream subscription, kept to the union of what its observers need (sans-IO: the hub runs the
 * upstream session's effects). An observer's request for channels waits for the upstream session, is
 * answered at once when the session carries them, or goes to the world for what is missing and is
 * answered with the world's answer. Channels nobody needs are dropped once per tick, never one that an
 * observer asked for in a subscribe still with the world (AWP-MA-004).
 */
import { missingChannels, unionOfNeeds, type Need, type Subscription } from './hub-demand.js';
import type { HubUpstream, HubUpstreamEffect } from './hub-upstream.js';
import type { SubscribedChannel } from './subscriber.js';

/** An observer session as the subscription sees it. */
export interface ChannelAsker {
  /** The answer to the observer's request `ref`: whether the upstream session carries its channels. */
  channelsEnsured(ref: number, ok: boolean): void;
  /** The channels it holds now. */
  needs(): Iterable<SubscribedChannel>;
}

export interface HubSubscriptionContext<A extends ChannelAsker> {
  readonly upstream: HubUpstream;
  observers(): Iterable<A>;
  /** The channels some observer holds now (the hub's channel index). */
  needed(): ReadonlySet<string>;
  run(effects: readonly HubUpstreamEffect[]): void;
  now(): number;
  /** A channel dropped upstream (its cached keyframe is history). */
  dropped(channel_id: number): void;
}

interface Ask<A> {
  readonly asker: A;
  readonly ref: number;
  readonly wants: readonly Need[];
}

export class HubSubscription<A extends ChannelAsker> {
  /** Requests waiting for the upstream session to be ready. */
  private readonly waiting: Ask<A>[] = [];
  /** Requests in an upstream `obs.subscribe`, by the hub's correlation of it. */
  private readonly subscribing = new Map<number, Ask<A>>();
  private nextRef = 1;
  /** An observer unsubscribed or ended, or a subscribe was answered, since the last tick. */
  private narrowDue = false;

  constructor(private readonly ctx: HubSubscriptionContext<A>) {}

  /** Whether an upstream `obs.subscribe` is with the world. */
  get asking(): boolean {
    return this.subscribing.size > 0;
  }

  /** Makes the upstream session carry `wants`, then answers the observer's request `ref`. */
  ensure(asker: A, ref: number, wants: readonly Need[]): void {
    const up = this.ctx.upstream;
    if (!up.isReady) {
      this.waiting.push({ asker, ref, wants: [...wants] });
      return;
    }
    const missing = missingChannels(wants, up.channels, up.grants);
    if (missing.length === 0) {
      asker.channelsEnsured(ref, true);
      return;
    }
    const hubRef = this.nextRef++;
    this.subscribing.set(hubRef, { asker, ref, wants: [...wants] });
    this.ctx.run(up.subscribe(missing, this.ctx.now(), hubRef));
  }

  /** What the upstream session subscribes at open: every need, waiting ones too, at the highest rate. */
  union(): Subscription[] {
    const needs: Need[] = this.waiting.flatMap((w) => w.wants);
    for (const o of this.ctx.observers())
      for (const g of o.needs()) needs.push({ channel: g.name, rate_hz: g.rate_hz });
    return unionOfNeeds(needs, this.ctx.upstream.channels);
  }

  /** The world answered the subscribe `hubRef`. */
  subscribed(hubRef: number, ok: boolean): void {
    const ask = this.subscribing.get(hubRef);
    if (ask === undefined) return;
    this.subscribing.delete(hubRef);
    ask.asker.channelsEnsured(ask.ref, ok);
    this.narrowLater(); // its asker may have left meanwhile: what it asked for may be nobody's now
  }

  /** The upstream session is ready: waiting requests go ahead. */
  ready(): void {
    for (const w of this.waiting.splice(0)) this.ensure(w.asker, w.ref, w.wants);
  }

  /** The upstream session failed: waiting requests are refused. */
  failed(): void {
    for (const w of this.waiting.splice(0)) w.asker.channelsEnsured(w.ref, false);
  }

  /**
   * The control connection dropped, and with it the world's answers to requests in flight: they wait for
   * the session again (resumed, the world's grants say what it carries; failed, they are refused).
   */
  lost(): void {
    this.waiting.push(...this.subscribing.values());
    this.subscribing.clear();
  }

  /** Some observer may need fewer channels: the subscription narrows at the next tick. */
  narrowLater(): void {
    this.narrowDue = true;
  }

  /**
   * Drops the upstream channels nobody needs: once per tick, so that observers leaving together (their
   * reconnect windows ending in one timer pass) cost one pass over the others, not one each.
   */
  tick(): void {
    const up = this.ctx.upstream;
    if (!this.narrowDue || !up.isReady) return;
    this.narrowDue = false;
    const needed = this.ctx.needed();
    // An observer whose subscribe is with the world holds nothing yet, but needs what it asked for.
    const asked = new Set([...this.subscribing.values()].flatMap((s) => s.wants.map((w) => w.channel)));
    const unused = [...up.grants.values()].filter((g) => !needed.has(g.channel) && !asked.has(g.channel));
    if (unused.length === 0) return;
    for (const g of unused) this.ctx.dropped(g.channel_id);
    this.ctx.run(
      up.unsubscribe(
        unused.map((g) => g.channel),
        this.ctx.now(),
      ),
    );
  }
}

/**
 * deploy/kustomize: every overlay renders with `kubectl kustomize`, every rendered object validates
 * against the Kubernetes schemas offline (see k8s-validate.ts), and the properties the edge relies on
 * hold: probes on the admin listener, a grace period longer than preStop + drain window, non-root
 * with a read-only root filesystem, documented Secret keys mounted as files the config names, an
 * edge.yaml the edge's loader accepts, an autoscaler on connections; the base needs no CRD, and the
 * components (ServiceMonitor, PrometheusRule, prometheus-adapter, Ingress) fit what they point at.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { IDeployment, IStatefulSet } from 'kubernetes-models/apps/v1';
import type { IHorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import type { IIngress, INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import type { IAPIService } from 'kubernetes-models/apiregistration.k8s.io/v1';
import type { IPodDisruptionBudget } from 'kubernetes-models/policy/v1';
import type { IConfigMap, IContainer, IPodSpec, IService } from 'kubernetes-models/v1';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { validateObject, type K8sObject } from './k8s-validate.js';
import { checkDeployConfig, KUBECTL, kubectlAvailable, renderOverlay, REPO } from './render.js';

const DEFAULT_DRAIN_WINDOW_MS = 20_000;
/** Kinds that need CRDs or an API extension: only in components, never in the base overlays. */
const OPTIONAL_KINDS = ['ServiceMonitor', 'PrometheusRule', 'APIService'];

interface Expectation {
  readonly replicas: number;
  readonly store: 'memory' | 'redis';
  readonly kinds: readonly string[];
  /** Which components the overlay includes. */
  readonly components?: readonly ('servicemonitor' | 'prometheus-rules' | 'prometheus-adapter' | 'ingress')[];
}

const MULTI_KINDS = [
  'ConfigMap',
  'ConfigMap',
  'Deployment',
  'HorizontalPodAutoscaler',
  'NetworkPolicy',
  'NetworkPolicy',
  'PodDisruptionBudget',
  'Service',
  'Service',
  'ServiceAccount',
  'StatefulSet',
];

const OVERLAYS: Record<string, Expectation> = {
  single: {
    replicas: 1,
    store: 'memory',
    kinds: ['ConfigMap', 'Deployment', 'NetworkPolicy', 'Service', 'ServiceAccount'],
  },
  multi: { replicas: 3, store: 'redis', kinds: MULTI_KINDS },
  'multi-monitored': {
    replicas: 3,
    store: 'redis',
    components: ['servicemonitor', 'prometheus-rules', 'prometheus-adapter', 'ingress'],
    kinds: [
      ...MULTI_KINDS,
      'ServiceMonitor',
      'PrometheusRule',
      'Ingress',
      // prometheus-adapter
      'ServiceAccount',
      'ConfigMap',
      'Deployment',
      'Service',
      'APIService',
      'ClusterRole',
      'ClusterRole',
      'ClusterRoleBinding',
      'ClusterRoleBinding',
      'ClusterRoleBinding',
      'RoleBinding',
    ],
  },
};

/** Secret name -> keys, from the `kubectl create secret generic NAME --from-literal=KEY=...` commands in deploy/README.md. */
function documentedSecrets(): Map<string, Set<string>> {
  const readme = readFileSync(join(REPO, 'deploy', 'README.md'), 'utf8');
  const secrets = new Map<string, Set<string>>();
  const commands = readme.replace(/\\\n\s*/g, ' ').matchAll(/kubectl create secret generic (\S+)([^\n]*)/g);
  for (const [, name, rest] of commands) {
    const keys = secrets.get(name!) ?? new Set<string>();
    for (const [, key] of rest!.matchAll(/--from-literal=([A-Za-z0-9._-]+)=/g)) keys.add(key!);
    secrets.set(name!, keys);
  }
  return secrets;
}

interface ServiceMonitorShape {
  spec: { selector: { matchLabels: Record<string, string> }; endpoints: { port: string; path: string }[] };
}

/** The typed shape of each kind this test reads fields of. */
interface Kinds {
  APIService: IAPIService;
  ConfigMap: IConfigMap;
  Ingress: IIngress;
  Deployment: IDeployment;
  NetworkPolicy: INetworkPolicy;
  Service: IService;
  ServiceMonitor: ServiceMonitorShape;
  StatefulSet: IStatefulSet;
}

/** The one object of `kind` (named `name`, if given); the test fails unless there is exactly one. */
function one<K extends keyof Kinds>(objects: readonly K8sObject[], kind: K, name?: string): Kinds[K] {
  const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  expect(found.length, `${kind}${name !== undefined ? `/${name}` : ''}`).toBe(1);
  return found[0] as unknown as Kinds[K];
}

function podSpecs(objects: readonly K8sObject[]): [string, IPodSpec][] {
  return objects
    .filter((o) => o.kind === 'Deployment' || o.kind === 'StatefulSet')
    .map((o) => [
      `${o.kind}/${o.metadata.name}`,
      (o as unknown as IDeployment | IStatefulSet).spec!.template.spec!,
    ]);
}

function matches(
  selector: Record<string, string> | undefined,
  labels: Record<string, string> | undefined,
): boolean {
  return selector !== undefined && Object.entries(selector).every(([k, v]) => labels?.[k] === v);
}

function sleepSeconds(container: IContainer): number {
  const cmd = container.lifecycle?.preStop?.exec?.command ?? [];
  expect(cmd[0], 'preStop is `sleep N`').toBe('sleep');
  return Number(cmd[1]);
}

if (!kubectlAvailable()) {
  describe.skip(`deploy/kustomize: ${KUBECTL} is not installed, overlays not rendered`, () => {
    it.skip('needs kubectl', () => undefined);
  });
} else {
  const docs = documentedSecrets();

  for (const [overlay, want] of Object.entries(OVERLAYS)) {
    describe(`deploy/kustomize/overlays/${overlay}`, () => {
      const objects = renderOverlay(overlay);
      const deployment = one(objects, 'Deployment', 'awp-edge');
      const pod = deployment.spec!.template.spec!;
      const edge = pod.containers.find((c) => c.name === 'awp-edge')!;
      const configVolume = pod.volumes?.find((v) => v.name === 'config');
      const configMap = one(objects, 'ConfigMap', configVolume?.configMap?.name);
      const edgeYaml = parseYaml(configMap.data?.['edge.yaml'] ?? '') as Record<string, unknown>;
      const port = (name: string): number | undefined =>
        edge.ports?.find((p) => p.name === name)?.containerPort;

      it('renders the expected objects', () => {
        expect(objects.map((o) => o.kind).sort()).toEqual([...want.kinds].sort());
        // Without components the overlay applies on a cluster without the Prometheus Operator's CRDs
        // or a custom metrics adapter.
        if (want.components === undefined)
          expect(objects.filter((o) => OPTIONAL_KINDS.includes(o.kind)).map((o) => o.kind)).toEqual([]);
      });

      it('every object validates against its schema, with no unknown fields', () => {
        const problems = objects.flatMap(validateObject);
        expect(problems).toEqual([]);
      });

      it('no image is untagged or :latest', () => {
        for (const [where, spec] of podSpecs(objects)) {
          for (const c of spec.containers) {
            expect(c.image, `${where} ${c.name}`).toMatch(/^[^:@\s]+(:[\w][\w.-]*)?(@sha256:[0-9a-f]{64})?$/);
            expect(c.image, `${where} ${c.name}`).toMatch(/:[\w][\w.-]*|@sha256:/);
            expect(c.image, `${where} ${c.name}`).not.toMatch(/:latest$/);
          }
        }
      });

      it(`runs ${want.replicas} replica(s) and the autoscaler and disruption budget fit`, () => {
        expect(deployment.spec?.replicas).toBe(want.replicas);
        const hpa = objects.find((o) => o.kind === 'HorizontalPodAutoscaler') as
          IHorizontalPodAutoscaler | undefined;
        const pdb = objects.find((o) => o.kind === 'PodDisruptionBudget') as IPodDisruptionBudget | undefined;
        if (want.store === 'memory') {
          // Memory sessions cannot move between pods: no scaling out, no eviction budget.
          expect(hpa).toBeUndefined();
          expect(pdb).toBeUndefined();
          return;
        }
        expect(hpa?.spec?.scaleTargetRef).toEqual({
          apiVersion: 'apps/v1',
          kind: 'Deployment',
          name: 'awp-edge',
        });
        expect(hpa?.spec?.minReplicas).toBe(want.replicas);
        expect(hpa!.spec!.maxReplicas).toBeGreaterThan(want.replicas);
        // Long-lived WebSockets never rebalance: the autoscaler counts connections per pod first.
        const pods = hpa!.spec!.metrics!.find((m) => m.type === 'Pods');
        expect(pods?.pods?.metric.name).toBe('awp_edge_agent_connections');
        expect(pods?.pods?.target).toMatchObject({ type: 'AverageValue' });
        expect(Number(pods?.pods?.target.averageValue)).toBeGreaterThan(0);
        expect(matches(pdb?.spec?.selector?.matchLabels, deployment.spec?.template.metadata?.labels)).toBe(
          true,
        );
      });

      it('probes hit /healthz and /readyz on the admin port the config binds on all interfaces', () => {
        const { config } = checkDeployConfig(edgeYaml, fakeEnv(edge));
        expect(config.admin).toEqual({ host: '0.0.0.0', port: port('admin') });
        expect(config.listen).toEqual({ host: '0.0.0.0', port: port('agent') });
        expect(edge.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'admin' });
        expect(edge.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'admin' });
        expect(edge.startupProbe?.httpGet).toEqual({ path: '/healthz', port: 'admin' });
      });

      it('terminationGracePeriodSeconds exceeds preStop sleep + drain window', () => {
        const drain = edgeYaml.drain as { window_ms?: number } | undefined;
        const windowMs = drain?.window_ms ?? DEFAULT_DRAIN_WINDOW_MS;
        expect(Number.isInteger(windowMs) && windowMs > 0).toBe(true);
        const graceMs = (pod.terminationGracePeriodSeconds ?? 30) * 1000;
        const preStopMs = sleepSeconds(edge) * 1000;
        expect(preStopMs).toBeGreaterThan(0);
        expect(graceMs).toBeGreaterThan(preStopMs + windowMs);
      });

      it('every pod runs non-root with a read-only root filesystem, no capabilities, RuntimeDefault seccomp', () => {
        for (const [where, spec] of podSpecs(objects)) {
          expect(spec.securityContext?.runAsNonRoot, where).toBe(true);
          expect(spec.securityContext?.runAsUser, where).toBeGreaterThan(0);
          expect(spec.securityContext?.seccompProfile?.type, where).toBe('RuntimeDefault');
          // Only the metrics adapter talks to the Kubernetes API (it is an API server extension).
          expect(spec.automountServiceAccountToken, where).toBe(where.endsWith('-prometheus-adapter'));
          for (const c of spec.containers) {
            expect(c.securityContext?.readOnlyRootFilesystem, `${where} ${c.name}`).toBe(true);
            expect(c.securityContext?.allowPrivilegeEscalation, `${where} ${c.name}`).toBe(false);
            expect(c.securityContext?.capabilities?.drop, `${where} ${c.name}`).toEqual(['ALL']);
            expect(c.resources?.requests?.cpu, `${where} ${c.name}`).toBeDefined();
            expect(c.resources?.requests?.memory, `${where} ${c.name}`).toBeDefined();
            expect(c.resources?.limits?.memory, `${where} ${c.name}`).toBeDefined();
            expect(c.resources?.limits?.cpu, `${where} ${c.name}`).toBeDefined();
          }
        }
        // The one writable path the edge may use is an emptyDir at /tmp.
        const tmp = edge.volumeMounts?.find((m) => m.mountPath === '/tmp');
        expect(pod.volumes?.find((v) => v.name === tmp?.name)?.emptyDir).toBeDefined();
      });

      it('every Secret reference names a Secret key documented in deploy/README.md', () => {
        const refs = secretRefs(objects);
        expect(refs.length).toBeGreaterThan(0);
        for (const ref of refs) {
          const [name, key] = ref.split('/') as [string, string];
          expect(docs.get(name)?.has(key), `${ref} is documented`).toBe(true);
        }
      });

      it('edge.yaml passes the edge config loader; every credential file it names is mounted from a Secret key', () => {
        const env = fakeEnv(edge);
        const { config, runtime } = checkDeployConfig(edgeYaml, env);
        expect(config.routes.length).toBeGreaterThan(0);
        expect(config.routes.every((r) => r.agent_tokens.length > 0 && !r.allow_anonymous)).toBe(true);
        // Every `*_env` the config names is an env var the container sets (else the edge refuses to start).
        for (const name of envNamesIn(edgeYaml)) expect(Object.keys(env), name).toContain(name);
        // Every `*_file` is a file the pod mounts from a Secret (projected, no subPath: rotated in place).
        const mounted = secretFiles(pod, edge);
        const files = filesIn(edgeYaml);
        expect(files.length).toBeGreaterThan(0);
        for (const f of files) expect(mounted.get(f), `${f} is mounted from a Secret`).toBeDefined();
        // check-config without the pod's files: exactly those are run-time requirements.
        expect(runtime.length).toBe(files.length);
        for (const m of edge.volumeMounts ?? []) expect(m.subPath, m.name).toBeUndefined();
        // A Secret key is optional in the pod exactly where the config can do without it: the agent
        // credentials are required, the upstream credential is not (a world may take none).
        expect(mounted.get(filesIn(edgeYaml.agents)[0]!)?.optional).toBe(false);
        const upstream = filesIn(edgeYaml.routes)[0];
        if (upstream !== undefined) expect(mounted.get(upstream)?.optional).toBe(true);
        const store = edgeYaml.store as { kind?: unknown; url_env?: unknown; key_prefix?: unknown };
        expect(store.kind).toBe(want.store);
        expect(config.store.kind).toBe(want.store);
        if (want.store === 'redis') {
          expect(typeof store.url_env).toBe('string');
          expect(env[store.url_env as string]).toMatch(/^rediss?:\/\//);
          expect(store.key_prefix).toBe('awp-edge:');
        }
        const drain = edgeYaml.drain as { window_ms?: unknown };
        expect(Number.isInteger(drain.window_ms)).toBe(true);
      });

      it('Services, NetworkPolicies and the ServiceMonitor select the pods and ports that exist', () => {
        const podLabels = deployment.spec?.template.metadata?.labels;
        const service = one(objects, 'Service', 'awp-edge');
        expect(matches(service.spec?.selector, podLabels)).toBe(true);
        expect(service.spec?.ports?.map((p) => [p.name, p.port, p.targetPort])).toEqual([
          ['agent', port('agent'), 'agent'],
          ['admin', port('admin'), 'admin'],
        ]);
        const policy = one(objects, 'NetworkPolicy', 'awp-edge');
        expect(matches(policy.spec?.podSelector.matchLabels, podLabels)).toBe(true);
        const policyPorts = policy.spec?.ingress?.flatMap((r) => r.ports?.map((p) => p.port) ?? []);
        expect(policyPorts?.sort()).toEqual(['admin', 'agent']);
        if (want.components?.includes('servicemonitor')) {
          const monitor = one(objects, 'ServiceMonitor');
          expect(matches(monitor.spec.selector.matchLabels, service.metadata?.labels)).toBe(true);
          expect(monitor.spec.endpoints).toEqual([
            expect.objectContaining({ port: 'admin', path: '/metrics' }),
          ]);
        }
      });

      if (want.components?.includes('ingress')) {
        it('the Ingress routes to the agent port with WebSocket timeouts above the hop ping interval', () => {
          const ingress = one(objects, 'Ingress');
          const service = one(objects, 'Service', 'awp-edge');
          const backends = ingress.spec!.rules!.flatMap((r) => r.http!.paths.map((x) => x.backend.service));
          expect(backends).toEqual([{ name: service.metadata!.name, port: { name: 'agent' } }]);
          expect(service.spec?.ports?.some((p) => p.name === 'agent')).toBe(true);
          const { config } = checkDeployConfig(edgeYaml, fakeEnv(edge));
          const annotations = ingress.metadata?.annotations ?? {};
          for (const k of ['proxy-read-timeout', 'proxy-send-timeout']) {
            const seconds = Number(annotations[`nginx.ingress.kubernetes.io/${k}`]);
            // Several ping intervals of silence fit inside the proxy's idle timeout.
            expect(seconds * 1000, k).toBeGreaterThanOrEqual(10 * config.timing.hop_ping_interval_ms);
          }
          expect(annotations['nginx.ingress.kubernetes.io/proxy-buffering']).toBe('off');
          expect(ingress.spec?.tls?.[0]?.hosts).toEqual(ingress.spec!.rules!.map((r) => r.host));
        });
      }

      if (want.components?.includes('prometheus-adapter')) {
        it('prometheus-adapter serves the metric the autoscaler scales on, as the custom metrics API', () => {
          const adapter = one(objects, 'Deployment', 'awp-edge-prometheus-adapter');
          const spec = adapter.spec!.template.spec!;
          const container = spec.containers[0]!;
          const args = container.args ?? [];
          const configArg = args.find((a) => a.startsWith('--config='))!.slice('--config='.length);
          const mount = container.volumeMounts!.find((m) => configArg.startsWith(`${m.mountPath}/`))!;
          const cm = one(
            objects,
            'ConfigMap',
            spec.volumes!.find((v) => v.name === mount.name)?.configMap?.name,
          );
          const rules = (
            parseYaml(cm.data![configArg.slice(mount.mountPath.length + 1)]!) as {
              rules: { seriesQuery: string; name: { as: string }; resources: { overrides: object } }[];
            }
          ).rules;
          const hpa = objects.find(
            (o) => o.kind === 'HorizontalPodAutoscaler',
          ) as unknown as IHorizontalPodAutoscaler;
          const wanted = hpa.spec!.metrics!.filter((m) => m.type === 'Pods').map((m) => m.pods!.metric.name);
          for (const name of wanted) {
            const r = rules.find((x) => x.name.as === name);
            expect(r, name).toBeDefined();
            // Per pod: the labels the ServiceMonitor's scrape adds map to the pod and its namespace.
            expect(r!.resources.overrides).toEqual({
              namespace: { resource: 'namespace' },
              pod: { resource: 'pod' },
            });
          }
          expect(args.some((a) => /^--prometheus-url=https?:\/\//.test(a))).toBe(true);
          const svc = one(objects, 'Service', 'awp-edge-prometheus-adapter');
          expect(matches(svc.spec?.selector, adapter.spec?.template.metadata?.labels)).toBe(true);
          const api = one(objects, 'APIService');
          expect(api.spec).toMatchObject({
            group: 'custom.metrics.k8s.io',
            service: { name: svc.metadata!.name, namespace: adapter.metadata!.namespace },
          });
          expect(svc.spec?.ports?.[0]?.port).toBe(api.spec?.service?.port);
        });
      }

      if (want.store === 'redis') {
        it('the bundled Redis persists (AOF, no eviction), admits only the edge, and matches the documented URL', () => {
          const sts = one(objects, 'StatefulSet', 'awp-edge-redis');
          const svc = one(objects, 'Service', 'awp-edge-redis');
          expect(matches(svc.spec?.selector, sts.spec?.template.metadata?.labels)).toBe(true);
          expect(sts.spec?.serviceName).toBe('awp-edge-redis');
          expect(sts.spec?.volumeClaimTemplates?.[0]?.metadata?.name).toBe('data');
          const conf = one(
            objects,
            'ConfigMap',
            sts.spec?.template.spec?.volumes?.find((v) => v.name === 'config')?.configMap?.name,
          );
          const redisConf = conf.data?.['redis.conf'] ?? '';
          expect(redisConf).toMatch(/^appendonly yes$/m);
          expect(redisConf).toMatch(/^maxmemory-policy noeviction$/m);
          expect(redisConf).toMatch(/^dir \/data$/m);
          const np = one(objects, 'NetworkPolicy', 'awp-edge-redis');
          expect(
            np.spec?.ingress?.[0]?.from?.map((f) =>
              matches(f.podSelector?.matchLabels, deployment.spec?.template.metadata?.labels),
            ),
          ).toEqual([true]);
          const readme = readFileSync(join(REPO, 'deploy', 'README.md'), 'utf8');
          expect(readme).toContain(`@${svc.metadata!.name}:${svc.spec!.ports![0]!.port}/0`);
        });
      }
    });
  }

  describe('deploy/README.md secrets', () => {
    it('every documented Secret key is used by some overlay (no stale documentation)', () => {
      const referenced = new Set(Object.keys(OVERLAYS).flatMap((o) => secretRefs(renderOverlay(o))));
      const documented = [...docs].flatMap(([name, keys]) => [...keys].map((k) => `${name}/${k}`));
      expect(documented.length).toBeGreaterThan(0);
      expect(documented.filter((d) => !referenced.has(d))).toEqual([]);
    });
  });
}

/**
 * `secret/key` of every Secret reference in the pods: env `secretKeyRef`s and the items of secret or
 * projected volumes. envFrom and volumes without `items` are refused: every key must be named.
 */
function secretRefs(objects: readonly K8sObject[]): string[] {
  const refs: string[] = [];
  for (const [where, spec] of podSpecs(objects)) {
    for (const c of spec.containers) {
      for (const e of c.env ?? []) {
        const ref = e.valueFrom?.secretKeyRef;
        if (ref) refs.push(`${ref.name}/${ref.key}`);
      }
      expect(c.envFrom ?? [], `${where}: no envFrom, every secret key is named`).toEqual([]);
    }
    for (const v of spec.volumes ?? []) {
      const sources = [
        ...(v.secret ? [{ name: v.secret.secretName, items: v.secret.items }] : []),
        ...(v.projected?.sources ?? []).flatMap((s) => (s.secret ? [s.secret] : [])),
      ];
      for (const src of sources) {
        expect(src.items?.length ?? 0, `${where} volume ${v.name}: secret keys named`).toBeGreaterThan(0);
        for (const i of src.items ?? []) refs.push(`${src.name}/${i.key}`);
      }
    }
  }
  return refs;
}

/** Files the container sees from Secret keys (projected volumes), with whether the key is optional. */
function secretFiles(pod: IPodSpec, container: IContainer): Map<string, { key: string; optional: boolean }> {
  const out = new Map<string, { key: string; optional: boolean }>();
  for (const m of container.volumeMounts ?? []) {
    const v = pod.volumes?.find((x) => x.name === m.name);
    for (const s of v?.projected?.sources ?? []) {
      for (const i of s.secret?.items ?? [])
        out.set(`${m.mountPath}/${i.path}`, {
          key: `${s.secret!.name}/${i.key}`,
          optional: s.secret!.optional === true,
        });
    }
  }
  return out;
}

/** Every `*_file` value in a config section. */
function filesIn(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(filesIn);
  if (typeof value !== 'object' || value === null) return [];
  return Object.entries(value).flatMap(([k, v]) =>
    k.endsWith('_file') && typeof v === 'string' ? [v] : filesIn(v),
  );
}

/** The container's environment with every Secret-backed variable given a plausible fake value. */
function fakeEnv(container: IContainer): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of container.env ?? []) {
    if (e.value !== undefined) env[e.name] = e.value;
    else if (e.valueFrom?.secretKeyRef)
      env[e.name] = e.name.includes('REDIS_URL') ? 'redis://:pw@redis:6379/0' : 'fake-token-1,fake-token-2';
  }
  return env;
}

function envNamesIn(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(envNamesIn);
  if (typeof value !== 'object' || value === null) return [];
  return Object.entries(value).flatMap(([k, v]) =>
    k.endsWith('_env') && typeof v === 'string' ? [v] : envNamesIn(v),
  );
}

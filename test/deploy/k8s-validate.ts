/**
 * Offline validation of rendered Kubernetes objects.
 *
 * Built-in kinds: the kubernetes-models classes (Kubernetes 1.27 OpenAPI schemas, compiled with ajv).
 * Those schemas do not forbid unknown fields, so a typo such as `readinessProb` would pass; the
 * validator is therefore run once more on a proxy that records which properties it reads. Every
 * property of a schema-described object is read by the compiled validator (a `properties` check
 * reads each known key; a map-typed field iterates all of its keys), so a key never read is a field
 * the schema does not know.
 *
 * ServiceMonitor and PrometheusRule (Prometheus Operator CRDs; @kubernetes-models/prometheus-operator
 * is not installed): JSON Schemas written from the CRDs' monitoring.coreos.com/v1 fields this project
 * uses and their neighbours (servicemonitor-schema.ts).
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { APIService } from 'kubernetes-models/apiregistration.k8s.io/v1';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { ClusterRole, ClusterRoleBinding, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Secret, Service, ServiceAccount } from 'kubernetes-models/v1';
import { PROMETHEUS_RULE_SCHEMA, SERVICE_MONITOR_SCHEMA } from './servicemonitor-schema.js';

export interface K8sObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly labels?: Record<string, string> };
  readonly [field: string]: unknown;
}

/** What validate() needs of a kubernetes-models class: its prototype's validate, run on any `this`. */
interface ModelClass {
  readonly prototype: { validate(this: unknown): void };
}

const MODELS: Record<string, ModelClass> = {
  'apps/v1/Deployment': Deployment,
  'apps/v1/StatefulSet': StatefulSet,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'apiregistration.k8s.io/v1/APIService': APIService,
  'networking.k8s.io/v1/Ingress': Ingress,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'rbac.authorization.k8s.io/v1/ClusterRole': ClusterRole,
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': ClusterRoleBinding,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
};

// strictRequired off: the endpoint's `not: {required: [port, targetPort]}` names properties defined a level up.
const ajv = new Ajv2020({ allErrors: true, strict: true, strictRequired: false });
/** Prometheus Operator kinds (CRDs), by schemas written for this test. */
const CUSTOM: Record<string, ReturnType<typeof ajv.compile>> = {
  ServiceMonitor: ajv.compile(SERVICE_MONITOR_SCHEMA),
  PrometheusRule: ajv.compile(PROMETHEUS_RULE_SCHEMA),
};

/** Problems with one object (empty: valid). An unknown apiVersion/kind is a problem, not a pass. */
export function validateObject(obj: K8sObject): string[] {
  const where = `${obj.kind}/${obj.metadata.name}`;
  const custom = obj.apiVersion === 'monitoring.coreos.com/v1' ? CUSTOM[obj.kind] : undefined;
  if (custom !== undefined) {
    if (custom(obj)) return [];
    return (custom.errors ?? []).map(
      (e) => `${where}: ${e.instancePath || '/'} ${e.message ?? ''} ${JSON.stringify(e.params)}`,
    );
  }
  const model = MODELS[`${obj.apiVersion}/${obj.kind}`];
  if (model === undefined) return [`${where}: no schema for ${obj.apiVersion} ${obj.kind} in this test`];
  try {
    model.prototype.validate.call(obj);
  } catch (err) {
    return [`${where}: ${(err as Error).message}`];
  }
  return unknownFields(model, obj).map((path) => `${where}: unknown field ${path}`);
}

/** Paths of object keys the kind's validator never read (fields its schema does not define). */
export function unknownFields(model: ModelClass, obj: object): string[] {
  const nodes: { path: string; target: object; read: Set<string> }[] = [];
  const proxies = new WeakMap<object, object>();
  const wrap = (value: unknown, path: string): unknown => {
    if (typeof value !== 'object' || value === null) return value;
    const known = proxies.get(value);
    if (known !== undefined) return known;
    const read = new Set<string>();
    if (!Array.isArray(value)) nodes.push({ path, target: value, read });
    const proxy = new Proxy(value, {
      get(target, key, receiver) {
        const v: unknown = Reflect.get(target, key, receiver);
        if (typeof key !== 'string' || !Object.hasOwn(target, key)) return v;
        read.add(key);
        return wrap(v, `${path}/${key}`);
      },
    });
    proxies.set(value, proxy);
    return proxy;
  };
  const root = wrap(obj, '');
  try {
    model.prototype.validate.call(root);
  } catch {
    // schema errors are reported by validateObject; only reads matter here
  }
  return nodes.flatMap(({ path, target, read }) =>
    Object.keys(target)
      .filter((k) => !read.has(k))
      .map((k) => `${path}/${k}`),
  );
}

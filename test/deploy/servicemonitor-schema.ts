/**
 * JSON Schema for a Prometheus Operator ServiceMonitor (monitoring.coreos.com/v1), written from the
 * CRD's field list: every spec and endpoint field is named (unknown ones are refused), the fields
 * this project uses are typed exactly (durations with the CRD's pattern, scheme's enum, the label
 * selector), the rest only by JSON type. It stands in for @kubernetes-models/prometheus-operator,
 * which is not installed.
 */
const DURATION =
  '^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$';
const DNS_SUBDOMAIN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';

const stringMap = { type: 'object', additionalProperties: { type: 'string' } };
const anyObject = { type: 'object' };
const anyArray = { type: 'array' };

const labelSelector = {
  type: 'object',
  additionalProperties: false,
  properties: {
    matchLabels: stringMap,
    matchExpressions: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['key', 'operator'],
        properties: {
          key: { type: 'string' },
          operator: { enum: ['In', 'NotIn', 'Exists', 'DoesNotExist'] },
          values: { type: 'array', items: { type: 'string' } },
        },
      },
    },
  },
};

const endpoint = {
  type: 'object',
  additionalProperties: false,
  not: { required: ['port', 'targetPort'] },
  properties: {
    port: { type: 'string', minLength: 1 },
    targetPort: {
      anyOf: [
        { type: 'integer', minimum: 1, maximum: 65535 },
        { type: 'string', minLength: 1 },
      ],
    },
    path: { type: 'string', pattern: '^/' },
    scheme: { enum: ['http', 'https', 'HTTP', 'HTTPS'] },
    interval: { type: 'string', pattern: DURATION },
    scrapeTimeout: { type: 'string', pattern: DURATION },
    honorLabels: { type: 'boolean' },
    honorTimestamps: { type: 'boolean' },
    trackTimestampsStaleness: { type: 'boolean' },
    enableHttp2: { type: 'boolean' },
    followRedirects: { type: 'boolean' },
    filterRunning: { type: 'boolean' },
    proxyUrl: { type: 'string' },
    bearerTokenFile: { type: 'string' },
    params: { type: 'object', additionalProperties: { type: 'array', items: { type: 'string' } } },
    authorization: anyObject,
    basicAuth: anyObject,
    bearerTokenSecret: anyObject,
    oauth2: anyObject,
    tlsConfig: anyObject,
    relabelings: anyArray,
    metricRelabelings: anyArray,
  },
};

export const SERVICE_MONITOR_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['apiVersion', 'kind', 'metadata', 'spec'],
  properties: {
    apiVersion: { const: 'monitoring.coreos.com/v1' },
    kind: { const: 'ServiceMonitor' },
    metadata: {
      type: 'object',
      additionalProperties: false,
      required: ['name'],
      properties: {
        name: { type: 'string', maxLength: 253, pattern: DNS_SUBDOMAIN },
        namespace: { type: 'string' },
        labels: stringMap,
        annotations: stringMap,
      },
    },
    spec: {
      type: 'object',
      additionalProperties: false,
      required: ['selector', 'endpoints'],
      properties: {
        selector: labelSelector,
        endpoints: { type: 'array', minItems: 1, items: endpoint },
        namespaceSelector: {
          type: 'object',
          additionalProperties: false,
          properties: { any: { type: 'boolean' }, matchNames: { type: 'array', items: { type: 'string' } } },
        },
        jobLabel: { type: 'string' },
        targetLabels: { type: 'array', items: { type: 'string' } },
        podTargetLabels: { type: 'array', items: { type: 'string' } },
        sampleLimit: { type: 'integer', minimum: 0 },
        targetLimit: { type: 'integer', minimum: 0 },
        labelLimit: { type: 'integer', minimum: 0 },
        labelNameLengthLimit: { type: 'integer', minimum: 0 },
        labelValueLengthLimit: { type: 'integer', minimum: 0 },
        keepDroppedTargets: { type: 'integer', minimum: 0 },
        attachMetadata: anyObject,
        scrapeProtocols: { type: 'array', items: { type: 'string' } },
      },
    },
  },
} as const;

/**
 * A Prometheus Operator PrometheusRule (monitoring.coreos.com/v1), from the CRD's fields: groups of
 * alerting or recording rules. The expressions themselves are checked by promtool (alerts.test.ts).
 */
const rule = {
  type: 'object',
  additionalProperties: false,
  required: ['expr'],
  oneOf: [{ required: ['alert'] }, { required: ['record'] }],
  properties: {
    alert: { type: 'string', pattern: '^[A-Za-z_][A-Za-z0-9_]*$' },
    record: { type: 'string', pattern: '^[a-zA-Z_:][a-zA-Z0-9_:]*$' },
    expr: { anyOf: [{ type: 'string', minLength: 1 }, { type: 'integer' }] },
    for: { type: 'string', pattern: DURATION },
    keep_firing_for: { type: 'string', pattern: DURATION },
    labels: stringMap,
    annotations: stringMap,
  },
};

export const PROMETHEUS_RULE_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['apiVersion', 'kind', 'metadata', 'spec'],
  properties: {
    apiVersion: { const: 'monitoring.coreos.com/v1' },
    kind: { const: 'PrometheusRule' },
    metadata: SERVICE_MONITOR_SCHEMA.properties.metadata,
    spec: {
      type: 'object',
      additionalProperties: false,
      required: ['groups'],
      properties: {
        groups: {
          type: 'array',
          minItems: 1,
          items: {
            type: 'object',
            additionalProperties: false,
            required: ['name', 'rules'],
            properties: {
              name: { type: 'string', minLength: 1 },
              interval: { type: 'string', pattern: DURATION },
              query_offset: { type: 'string', pattern: DURATION },
              limit: { type: 'integer', minimum: 0 },
              partial_response_strategy: { type: 'string' },
              labels: stringMap,
              rules: { type: 'array', minItems: 1, items: rule },
            },
          },
        },
      },
    },
  },
} as const;

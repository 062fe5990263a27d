/**
 * `awp-edge example-config`: a commented configuration to start from. It passes `check-config` as printed
 * (test/cli/example-config.test.ts), so a new operator edits a working file rather than writing one.
 */
export const EXAMPLE_CONFIG = `# yaml-language-server: $schema=./node_modules/awp-edge/dist/config/edge.schema.json
# awp-edge configuration. Check it with \`awp-edge check-config edge.yaml\`, run it with
# \`awp-edge serve --config edge.yaml\`. Every key but routes is optional; every key, its type, range,
# default and meaning: the JSON Schema named on the first line (editors with yaml-language-server use it).
# Credentials never appear in this file: *_env names an environment variable, *_file a file (e.g. a
# mounted Secret). check-config lists the ones that must exist at run time; --strict requires them now.
# *_file credentials rotate while the edge runs: re-read on SIGHUP and when the files change
# (credential_files below); variables are read once, at start.

listen: 127.0.0.1:8720 # agent-facing listener; loopback unless you say otherwise (then configure tls:)
admin: 127.0.0.1:9464 # /healthz, /readyz, /metrics
# public_url: wss://edge.example.com # how agents reach the edge (the stream endpoints it hands out)
engine: auto # auto (uWebSockets.js where it loads) | uws | ws
log_level: info # fatal | error | warn | info | debug | trace | silent

agents: # who may connect, on every route unless a route says otherwise
  tokens_env: AWP_EDGE_AGENT_TOKENS # comma-separated; or tokens_file: /run/secrets/agent-tokens

routes:
  - name: world # label in logs and metrics
    path: / # where agents connect (several routes: /worlds/arm, /worlds/grid, ...)
    upstream: ws://127.0.0.1:8710/ # the world's control endpoint
    upstream_token_env: AWP_EDGE_UPSTREAM_TOKEN # the edge's credential toward the world; remove if none
    observers: fanout # observer sessions share one upstream session (relay: one each)
    # approvers: # approver connections (AWP-APR-005), relayed with their own credential
    #   tokens_env: AWP_EDGE_APPROVER_TOKENS
    # allowed_origins: [https://console.example.com] # web pages that may connect (default: same origin)

# tls: # serve wss:// (or terminate TLS in front of the edge)
#   cert_file: /etc/awp-edge/tls/cert.pem
#   key_file: /etc/awp-edge/tls/key.pem

store:
  kind: memory # memory: one replica; redis: several (url_env: AWP_EDGE_REDIS_URL), sessions resume anywhere

budgets: # per agent credential; exceeding one is refused in the protocol's terms
  max_connections: 2048 # HTTP 429 before the upgrade
  max_sessions: 1024 # -32004 AWP_EDGE_BUDGET_EXCEEDED (retryable)
  max_messages_per_second: 2000 # close 1008

drain:
  window_ms: 20000 # SIGTERM: agents are closed (1001) spread over this window, and resume elsewhere

viewer:
  enabled: false # true: the live viewer page at http://<listen>/viewer/

credential_files:
  watch: true # re-read *_file credentials when they change (SIGHUP re-reads them either way)
`;

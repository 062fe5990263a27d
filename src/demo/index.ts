/**
 * The built-in demo worlds' server, as tests and benchmarks start one (tests of the sans-IO cores import
 * their modules directly).
 */
export { startDemoWorld } from './server.js';
export type { DemoServerOptions, RunningDemoWorld } from './server.js';

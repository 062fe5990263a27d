/** The built-in demo worlds: sans-IO cores (for tests) and the WebSocket server that hosts one. */
export { startDemoWorld } from './server.js';
export type { DemoServerHandle, DemoServerOptions, RunningDemoWorld } from './server.js';
export { createArmWorld, createDemoWorld, createGridWorld } from './create.js';
export type { DemoKind } from './create.js';
export { DemoWorld } from './world.js';
export type { DemoWorldOptions } from './world.js';
export { ARM_DEFAULTS, GRID_DEFAULTS, armConfig, gridConfig } from './config.js';
export type { ArmConfig, ArmOptions, CommonConfig, GridConfig, GridOptions } from './config.js';
export { LatestWinsOutbox } from './outbox.js';
export type { CloseOutput, ConnId, FrameOutput, Output, TextOutput } from './types.js';

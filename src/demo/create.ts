/** Factories: a demo world core (sans-IO) of either kind, with its configuration. */
import { ArmSim } from './arm.js';
import { armConfig, gridConfig } from './config.js';
import type { ArmConfig, ArmOptions, GridConfig, GridOptions } from './config.js';
import { GridSim } from './grid.js';
import { DemoWorld } from './world.js';
import type { DemoWorldOptions } from './world-state.js';

export type DemoKind = 'grid' | 'arm';

export function createGridWorld(opts: GridOptions = {}, core: DemoWorldOptions = {}): DemoWorld {
  const config: GridConfig = gridConfig(opts);
  return new DemoWorld(new GridSim(config), config, core);
}

export function createArmWorld(opts: ArmOptions = {}, core: DemoWorldOptions = {}): DemoWorld {
  const config: ArmConfig = armConfig(opts);
  return new DemoWorld(new ArmSim(config), config, core);
}

export function createDemoWorld(
  kind: DemoKind,
  opts: GridOptions & ArmOptions = {},
  core: DemoWorldOptions = {},
): DemoWorld {
  return kind === 'grid' ? createGridWorld(opts, core) : createArmWorld(opts, core);
}

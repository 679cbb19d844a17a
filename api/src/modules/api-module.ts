import type { Registry } from 'prom-client';
import type { AppDeps, ProjectResourceCounter } from '../app-deps.js';
import type { AppServices } from '../app-services.js';
import type { RouteDef } from '../http/route.js';

/** A resource module: its routes and what it counts toward "the project is not empty" (modules/registry.ts lists them). */
export interface ApiModule {
  name: string;
  routes(deps: AppDeps, services: AppServices): RouteDef[];
  projectResources?: ProjectResourceCounter[];
  /** Registers the module's own metrics on the app's registry (served at /metrics). */
  metrics?(registry: Registry, deps: AppDeps): void;
}

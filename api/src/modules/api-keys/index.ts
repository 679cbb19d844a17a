/** API keys' facade. */
export { apiKeyRoutes } from './routes.js';
export * from './service.js';

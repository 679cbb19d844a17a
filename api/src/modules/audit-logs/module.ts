import type { ApiModule } from '../api-module.js';
import { auditLogRoutes } from './routes.js';

export const auditLogsModule: ApiModule = { name: 'audit-logs', routes: auditLogRoutes };

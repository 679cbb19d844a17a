/** Health's facade. */
export * from './routes.js';

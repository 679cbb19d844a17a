/** The service's version: the OpenAPI document's info.version and the home page's. */
export const API_VERSION = '0.1.0';

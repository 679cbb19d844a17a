/** A build's failure that is the app's (its source, its dependencies): it becomes the deployment's status_reason. */
export class BuildError extends Error {}

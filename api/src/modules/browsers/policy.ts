import { z } from 'zod';

/**
 * Chrome enterprise policies a caller may not set, because the service depends on what
 * they control. Each entry says why, and the 400 repeats it.
 */
export const BLOCKED_POLICIES: Readonly<Record<string, string>> = {
  // The service routes traffic through the session's proxy_id.
  ProxySettings: 'the proxy is set through proxy_id',
  ProxyMode: 'the proxy is set through proxy_id',
  ProxyServer: 'the proxy is set through proxy_id',
  ProxyServerMode: 'the proxy is set through proxy_id',
  ProxyPacUrl: 'the proxy is set through proxy_id',
  ProxyBypassList: 'the proxy is set through proxy_id',
  // WebRTC's own packets would otherwise go around the proxy (BROWSERPLANE_BLOCK_PRIVATE_NETWORKS).
  WebRtcIPHandling: 'WebRTC is routed by the service, so that it cannot go around the proxy',
  WebRtcIPHandlingUrl: 'WebRTC is routed by the service, so that it cannot go around the proxy',
  // CDP is how the service, Playwright and puppeteer drive the browser.
  RemoteDebuggingAllowed: 'remote debugging (CDP) is how the service drives the browser',
  DeveloperToolsAvailability: 'disabling developer tools also disables parts of CDP',
  DeveloperToolsDisabled: 'disabling developer tools also disables parts of CDP',
  // Extensions are loaded through the extensions parameter.
  ExtensionInstallForcelist: 'extensions are managed by the service',
  ExtensionInstallBlocklist: 'extensions are managed by the service',
  ExtensionInstallAllowlist: 'extensions are managed by the service',
  ExtensionInstallSources: 'extensions are managed by the service',
  ExtensionAllowedTypes: 'extensions are managed by the service',
  ExtensionSettings: 'extensions are managed by the service',
  // The user-data dir holds the session's profile; downloads land where fs can reach them.
  UserDataDir: 'the user-data dir holds the session’s profile',
  DiskCacheDir: 'the browser’s directories are managed by the service',
  DownloadDirectory: 'downloads go to the folder the fs endpoints serve',
  ForceEphemeralProfiles: 'profiles could no longer be saved',
  IncognitoModeAvailability: 'forced incognito breaks profiles and CDP targets',
  BrowserGuestModeEnforced: 'guest mode breaks profiles',
  HeadlessMode: 'headless is chosen per session through headless',
};

const POLICY_NAME = /^[A-Za-z][A-Za-z0-9]{0,127}$/;
const MAX_POLICY_JSON_BYTES = 64 * 1024;

export const chromePolicySchema = z
  .record(z.string(), z.unknown())
  .superRefine((policy, ctx) => {
    for (const name of Object.keys(policy)) {
      if (!POLICY_NAME.test(name)) {
        ctx.addIssue({ code: 'custom', path: [name], message: `${JSON.stringify(name)} is not a Chrome policy name` });
      } else if (Object.hasOwn(BLOCKED_POLICIES, name)) {
        ctx.addIssue({ code: 'custom', path: [name], message: `policy ${name} cannot be set: ${BLOCKED_POLICIES[name]}` });
      }
    }
    if (Buffer.byteLength(JSON.stringify(policy)) > MAX_POLICY_JSON_BYTES) {
      ctx.addIssue({ code: 'custom', message: `at most ${MAX_POLICY_JSON_BYTES} bytes of JSON` });
    }
  })
  .describe(`Chrome enterprise policies for this browser alone; refused: ${Object.keys(BLOCKED_POLICIES).join(', ')}`);

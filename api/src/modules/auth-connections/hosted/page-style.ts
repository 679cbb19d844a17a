/** The hosted login page's style (page.ts serves it as hosted.css). */
export const HOSTED_CSS = `html { background: #f4f5f7; color: #1d1f23; font: 16px/1.5 system-ui, sans-serif; }
body { margin: 0; }
main { max-width: 440px; margin: 40px auto; padding: 24px 28px; background: #fff; border-radius: 10px; box-shadow: 0 1px 4px rgba(0,0,0,.12); }
body:has(#browser-frame:not([hidden])) main { max-width: 1040px; }
h1 { font-size: 22px; margin: 0 0 12px; overflow-wrap: anywhere; }
h2 { font-size: 15px; margin: 20px 0 6px; color: #4a4f57; }
#status:empty { display: none; }
body[data-state="working"] #status::before, body[data-state="loading"] #status::before { content: ""; display: inline-block; width: 12px; height: 12px; margin-right: 8px; border: 2px solid #0b5cff; border-right-color: transparent; border-radius: 50%; animation: spin 1s linear infinite; vertical-align: -1px; }
@keyframes spin { to { transform: rotate(360deg); } }
.alert { background: #fde8e8; color: #8a1c1c; padding: 8px 12px; border-radius: 6px; margin: 12px 0; overflow-wrap: anywhere; }
.alert:empty { display: none; }
.field { margin: 14px 0; }
label { display: block; font-weight: 600; overflow-wrap: anywhere; }
input { display: block; width: 100%; box-sizing: border-box; margin-top: 4px; padding: 9px 10px; font: inherit; border: 1px solid #9aa0a8; border-radius: 6px; }
input[aria-invalid="true"] { border-color: #c62828; }
.field-error { color: #c62828; margin: 4px 0 0; font-size: 14px; }
.field-error:empty { display: none; }
button { font: inherit; cursor: pointer; border-radius: 6px; }
button:disabled { cursor: default; opacity: .6; }
:focus-visible { outline: 3px solid #5b9dff; outline-offset: 2px; }
.primary { margin-top: 8px; padding: 9px 18px; background: #0b5cff; color: #fff; border: 0; }
.choice { display: block; width: 100%; margin: 8px 0; padding: 10px 12px; text-align: left; background: #fff; color: inherit; border: 1px solid #9aa0a8; }
.choice span { display: block; font-size: 14px; color: #5a5f67; }
#browser { margin-top: 20px; }
#browser-toggle { padding: 6px 12px; background: #fff; border: 1px solid #9aa0a8; }
#browser-frame iframe { display: block; width: 100%; aspect-ratio: 4 / 3; margin-top: 10px; border: 1px solid #ccc; border-radius: 6px; background: #111; }
`;

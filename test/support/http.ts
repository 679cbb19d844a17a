export interface HttpResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

/** A small fetch wrapper: JSON in, parsed JSON (or text) out, never throws on a status. */
export class HttpClient {
  constructor(
    readonly baseUrl: string,
    readonly key?: string,
    readonly extraHeaders: Record<string, string> = {},
  ) {}

  withHeaders(headers: Record<string, string>): HttpClient {
    return new HttpClient(this.baseUrl, this.key, { ...this.extraHeaders, ...headers });
  }

  get<T = any>(path: string, headers?: Record<string, string>) {
    return this.request<T>('GET', path, undefined, headers);
  }
  post<T = any>(path: string, body?: unknown, headers?: Record<string, string>) {
    return this.request<T>('POST', path, body, headers);
  }
  patch<T = any>(path: string, body?: unknown, headers?: Record<string, string>) {
    return this.request<T>('PATCH', path, body, headers);
  }
  put<T = any>(path: string, body?: unknown, headers?: Record<string, string>) {
    return this.request<T>('PUT', path, body, headers);
  }
  delete<T = any>(path: string, body?: unknown, headers?: Record<string, string>) {
    return this.request<T>('DELETE', path, body, headers);
  }

  /** `body` undefined sends none; a string is sent as is; anything else as JSON. */
  async request<T = any>(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<HttpResponse<T>> {
    const all: Record<string, string> = { ...this.extraHeaders };
    if (this.key !== undefined) all.authorization = `Bearer ${this.key}`;
    let payload: string | undefined;
    if (body !== undefined) {
      payload = typeof body === 'string' ? body : JSON.stringify(body);
      all['content-type'] = 'application/json';
    }
    Object.assign(all, headers);
    const res = await fetch(this.baseUrl + path, { method, headers: all, ...(payload !== undefined ? { body: payload } : {}) });
    const text = await res.text();
    let parsed: unknown = text;
    if ((res.headers.get('content-type') ?? '').includes('application/json') && text) parsed = JSON.parse(text);
    return { status: res.status, headers: res.headers, body: parsed as T, text };
  }
}

/** The `field` of every detail of an error response. */
export const errorFields = (res: HttpResponse): string[] =>
  (res.body as { details: Array<{ field: string }> }).details.map((d) => d.field);

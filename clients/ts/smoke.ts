// Smoke test of the TypeScript client generated from openapi/openapi.json (openapi-typescript
// types + openapi-fetch), against a live server with auth_mode = api_key.
// Usage: node dist/smoke.js BASE_URL TOKEN   (TOKEN: an API key of a super user)
// Every call is typed by the generated schema, so a spec that does not describe the server
// fails to compile or fails here; typed 401, 403 and 416 bodies included.
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

type ErrorCode = components["schemas"]["ErrorCode"];

const [base, token] = process.argv.slice(2);
if (!base || !token) {
  throw new Error("usage: smoke.js BASE_URL TOKEN");
}
let checks = 0;
function check(condition: boolean, what: string): void {
  if (!condition) {
    console.error(`typescript client smoke FAILED: ${what}`);
    process.exit(1);
  }
  checks += 1;
}
function code(error: { error: { code: ErrorCode } } | undefined): ErrorCode | undefined {
  return error?.error.code;
}

const admin = createClient<paths>({ baseUrl: base, headers: { Authorization: `Bearer ${token}` } });
const anonymous = createClient<paths>({ baseUrl: base });
const topic = `ts-smoke-${Date.now()}`;

const created = await admin.POST("/v1/topics", { body: { name: topic, partitions: 1 } });
check(created.response.status === 201, `create status ${created.response.status}`);
check(created.data?.name === topic && created.data.partitions.length === 1, "created topic");

const produced = await admin.POST("/v1/topics/{topic}/records", {
  params: { path: { topic } },
  body: { records: [{ key: "k", value: { n: 1 } }, { key: "k", value: "two" }] },
});
check(produced.response.status === 200, `produce status ${produced.response.status}`);
// The answer is per record by default, per partition with answer=compact.
const perRecord = produced.data && "offsets" in produced.data ? produced.data : undefined;
check(perRecord?.offsets.map((o) => o.offset).join(",") === "0,1", "offsets 0 and 1");

const fetched = await admin.GET("/v1/topics/{topic}/partitions/{partition}/records", {
  params: { path: { topic, partition: 0 }, query: { offset: 0 } },
});
check(fetched.response.status === 200, `fetch status ${fetched.response.status}`);
// The 200 answer has one schema per media type; the default (JSON) one is the FetchResponse.
const page = fetched.data as components["schemas"]["FetchResponse"] | undefined;
const values = page?.records.map((r) => JSON.stringify(r.value));
check(values?.join("|") === '{"n":1}|"two"', `fetched values ${values}`);

const beyond = await admin.GET("/v1/topics/{topic}/partitions/{partition}/records", {
  params: { path: { topic, partition: 0 }, query: { offset: 99 } },
});
check(beyond.response.status === 416, `out of range status ${beyond.response.status}`);
check(code(beyond.error) === "offset_out_of_range", "typed offset_out_of_range");
check(beyond.error?.error.latest_offset === 2, "416 carries the latest offset");

const unauthenticated = await anonymous.GET("/v1/topics/{topic}", { params: { path: { topic } } });
check(unauthenticated.response.status === 401, `no token: ${unauthenticated.response.status}`);
check(code(unauthenticated.error) === "unauthenticated", "typed unauthenticated");

const key = await admin.POST("/v1/auth/keys", { body: { principal: "ts-nobody" } });
check(key.response.status === 201 && !!key.data?.token, "created a key");
const nobody = createClient<paths>({
  baseUrl: base,
  headers: { Authorization: `Bearer ${key.data?.token}` },
});
const forbidden = await nobody.GET("/v1/topics/{topic}", { params: { path: { topic } } });
check(forbidden.response.status === 403, `no ACL: ${forbidden.response.status}`);
check(code(forbidden.error) === "forbidden", "typed forbidden");

const compact = await admin.POST("/v1/topics/{topic}/records", {
  params: { path: { topic }, query: { answer: "compact" } },
  body: { records: [{ key: "k", value: 3 }, { key: "k", value: 4 }] },
});
const ranges = compact.data && "partitions" in compact.data ? compact.data.partitions : undefined;
check(
  ranges?.length === 1 && ranges[0].base_offset === 2 && ranges[0].record_count === 2,
  `compact answer ${JSON.stringify(compact.data)}`,
);

const deleted = await admin.DELETE("/v1/topics/{topic}", { params: { path: { topic } } });
check(deleted.response.status === 204, `delete status ${deleted.response.status}`);
console.log(`typescript client smoke: ${checks} checks passed`);

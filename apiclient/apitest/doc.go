// Package apitest provides a fake of the upstream messaging and project
// lookup API, shaped like net/http/httptest.
//
// A Server answers the two read operations of the upstream interface:
//
//	GET /platform/api/v1/projects/externalDetail?nft_name=<name>
//	GET /platform/api/v1/messages/list?project_id=<id>
//
// with the same JSON envelope the real service uses. It enforces the
// client_id and client_secret headers, requires Content-Type:
// application/json on list requests, records every request it receives, and
// can be told to misbehave for chosen projects (see Fault) so that a client's
// error handling and retry logic can be exercised.
//
// Behaviour the upstream specification leaves open is fixed here as follows,
// so that tests can rely on it:
//
//   - Missing or wrong credentials: HTTP 401 with the failure envelope.
//   - List request without Content-Type: application/json: HTTP 400 with the
//     failure envelope.
//   - Missing, empty or unknown nft_name, and missing, non-integer or unknown
//     project_id: HTTP 200 with the failure envelope.
//   - A method other than GET on a known path: HTTP 405 with the failure
//     envelope and an Allow header.
//   - An unknown path: HTTP 404 with the failure envelope.
//
// Checks run in this order: path, method, fault, credentials, Content-Type,
// query parameters, lookup. A fault therefore fires even for requests that
// would otherwise be rejected.
package apitest

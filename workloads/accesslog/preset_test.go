package accesslog

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// Each product's log, read by its name, gives the requests its lines
// hold, the same as read with the explicit fields; shaped as each
// product's documentation shows its lines (quoted fields, arrays, nested
// objects, times to the µs or ns, an address with its port).
func TestPresets(t *testing.T) {
	for _, tt := range []struct {
		format string
		lines  string
		same   Options // the explicit flags the preset stands for
		keys   []string
		at     []int64
		status []int
		agent  string // the first line's
		path   string // the first line's
	}{
		{
			format: "caddy",
			lines: `{"level":"info","ts":1646861401.524102,"logger":"http.log.access","msg":"handled request","request":{"remote_ip":"127.0.0.1","remote_port":"41342","client_ip":"203.0.113.9","proto":"HTTP/2.0","method":"GET","host":"localhost","uri":"/v1/feed?page=2","headers":{"User-Agent":["curl/7.82.0"],"Accept":["*/*"],"Accept-Encoding":["gzip, deflate, br"]},"tls":{"resumed":false,"version":772,"cipher_suite":4865,"proto":"h2","server_name":"example.com"}},"bytes_read":0,"user_id":"","duration":0.000929675,"size":10900,"status":200,"resp_headers":{"Server":["Caddy"],"Content-Type":["text/html; charset=utf-8"]}}
{"level":"info","ts":1646861401.624102,"logger":"http.log.access","msg":"handled request","request":{"remote_ip":"127.0.0.1","remote_port":"41343","client_ip":"203.0.113.9","proto":"HTTP/2.0","method":"GET","host":"localhost","uri":"/v1/me","headers":{"User-Agent":["curl/7.82.0"]}},"duration":0.0002,"size":12,"status":429}
`,
			same:   Options{Format: JSON, Key: KeySpec{Field: "request.client_ip"}, Time: ".ts", Status: ".status", Agent: ".request.headers.User-Agent", Path: ".request.uri"},
			keys:   []string{"203.0.113.9", "203.0.113.9"},
			at:     []int64{1646861401_524102000, 1646861401_624102000},
			status: []int{200, 429},
			agent:  "curl/7.82.0", path: "/v1/feed",
		},
		{
			format: "traefik",
			lines: `{"ClientAddr":"192.168.1.10:54321","ClientHost":"192.168.1.10","ClientPort":"54321","ClientUsername":"-","DownstreamContentSize":19,"DownstreamStatus":200,"Duration":2087459,"OriginContentSize":19,"OriginDuration":1935042,"OriginStatus":200,"Overhead":152417,"RequestAddr":"whoami.localhost","RequestContentSize":0,"RequestCount":1,"RequestHost":"whoami.localhost","RequestMethod":"GET","RequestPath":"/api/v1/items?x=1","RequestPort":"-","RequestProtocol":"HTTP/1.1","RequestScheme":"http","RetryAttempts":0,"RouterName":"whoami@docker","ServiceAddr":"172.18.0.3:80","ServiceName":"whoami@docker","ServiceURL":"http://172.18.0.3:80","StartLocal":"2024-05-01T12:00:00.123456789+02:00","StartUTC":"2024-05-01T10:00:00.123456789Z","entryPointName":"web","level":"info","msg":"","request_User-Agent":"curl/8.5.0","time":"2024-05-01T10:00:00Z"}
`,
			same:   Options{Format: JSON, Key: KeySpec{Field: "ClientHost"}, Time: ".StartUTC", Status: ".DownstreamStatus", Agent: ".request_User-Agent", Path: ".RequestPath"},
			keys:   []string{"192.168.1.10"},
			at:     []int64{at("2024-05-01T10:00:00.123456789Z")},
			status: []int{200},
			agent:  "curl/8.5.0", path: "/api/v1/items",
		},
		{
			format: "alb",
			lines: `http 2018-07-02T22:23:00.186641Z app/my-loadbalancer/50dc6c495c0c9188 192.168.131.39:2817 10.0.0.1:80 0.000 0.001 0.000 200 200 34 366 "GET http://www.example.com:80/orders/17?x=1 HTTP/1.1" "curl/7.46.0" - - arn:aws:elasticloadbalancing:us-east-2:123456789012:targetgroup/my-targets/73e2d6bc24d8a067 "Root=1-58337262-36d228ad5d99923122bbe354" "-" "-" 0 2018-07-02T22:22:48.364000Z "forward" "-" "-" "10.0.0.1:80" "200" "-" "-" TID_1234abcd5678ef90
https 2018-07-02T22:23:00.286641Z app/my-loadbalancer/50dc6c495c0c9188 [2001:db8::7]:2818 10.0.0.1:80 0.086 0.048 0.037 503 - 0 57 "GET https://www.example.com:443/ HTTP/1.1" "Mozilla/5.0 (X11; Linux)" ECDHE-RSA-AES128-GCM-SHA256 TLSv1.2 arn:aws:elasticloadbalancing:us-east-2:123456789012:targetgroup/my-targets/73e2d6bc24d8a067 "Root=1-58337281-1d84f3d73c47ec4e58577259" "www.example.com" "arn:aws:acm:us-east-2:123456789012:certificate/12345678-1234-1234-1234-123456789012" 1 2018-07-02T22:22:48.364000Z "forward" "-" "-" "10.0.0.1:80" "-" "-" "-" TID_1234abcd5678ef91
`,
			same:   Options{Format: `$type $time_iso8601 $elb $client_port $target_port $request_processing_time $target_processing_time $response_processing_time $status $target_status_code $received_bytes $sent_bytes "$request" "$http_user_agent" $rest`},
			keys:   []string{"192.168.131.39", "2001:db8::7"},
			at:     []int64{at("2018-07-02T22:23:00.186641Z"), at("2018-07-02T22:23:00.286641Z")},
			status: []int{200, 503},
			agent:  "curl/7.46.0", path: "/orders/17",
		},
		{
			format: "cloudflare",
			lines: `{"ClientIP":"192.0.2.1","ClientRequestHost":"example.com","ClientRequestMethod":"GET","ClientRequestURI":"/api/v1/items?page=2","ClientRequestUserAgent":"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7)","EdgeEndTimestamp":1700000000100000000,"EdgeResponseBytes":1234,"EdgeResponseStatus":200,"EdgeStartTimestamp":1700000000012345678,"RayID":"7f1a2b3c4d5e6f70"}
{"ClientIP":"2001:db8::1","ClientRequestHost":"example.com","ClientRequestMethod":"POST","ClientRequestURI":"/login","ClientRequestUserAgent":"curl/8.0.1","EdgeEndTimestamp":1700000001100000000,"EdgeResponseBytes":10,"EdgeResponseStatus":429,"EdgeStartTimestamp":1700000001000000001,"RayID":"7f1a2b3c4d5e6f71"}
`,
			same:   Options{Format: JSON, Key: KeySpec{Field: "ClientIP"}, Time: ".EdgeStartTimestamp", Status: ".EdgeResponseStatus", Agent: ".ClientRequestUserAgent", Path: ".ClientRequestURI"},
			keys:   []string{"192.0.2.1", "2001:db8::1"},
			at:     []int64{1700000000012345678, 1700000001000000001},
			status: []int{200, 429},
			agent:  "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7)", path: "/api/v1/items",
		},
		{
			format: "gcp",
			lines: `{"httpRequest":{"requestMethod":"GET","requestUrl":"https://shop.example.com/api/v1/cart?id=3","requestSize":"123","status":200,"responseSize":"456","userAgent":"curl/8.0","remoteIp":"203.0.113.7","serverIp":"10.128.0.5","latency":"0.012345s"},"insertId":"1f2e3d4c","jsonPayload":{"@type":"type.googleapis.com/google.cloud.loadbalancing.type.LoadBalancerLogEntry","statusDetails":"response_sent_by_backend"},"logName":"projects/p/logs/requests","receiveTimestamp":"2024-05-01T10:00:00.234567891Z","resource":{"type":"http_load_balancer","labels":{"project_id":"p"}},"severity":"INFO","timestamp":"2024-05-01T10:00:00.123456Z"}
`,
			same:   Options{Format: JSON, Key: KeySpec{Field: "httpRequest.remoteIp"}, Time: ".timestamp", Status: ".httpRequest.status", Agent: ".httpRequest.userAgent", Path: ".httpRequest.requestUrl"},
			keys:   []string{"203.0.113.7"},
			at:     []int64{at("2024-05-01T10:00:00.123456Z")},
			status: []int{200},
			agent:  "curl/8.0", path: "/api/v1/cart",
		},
	} {
		t.Run(tt.format, func(t *testing.T) {
			got, r := read(t, tt.lines, Options{Format: tt.format})
			if n, skips := r.Skipped(); n != 0 {
				t.Fatalf("skipped %d lines: %v", n, skips)
			}
			want, _ := read(t, tt.lines, tt.same)
			if !slices.Equal(got, want) {
				t.Errorf("--format %s read\n%+v\nthe explicit fields\n%+v", tt.format, got, want)
			}
			var keys []string
			var ats []int64
			var status []int
			for _, e := range got {
				keys, ats, status = append(keys, e.Key), append(ats, e.At), append(status, e.Status)
			}
			if !slices.Equal(keys, tt.keys) || !slices.Equal(ats, tt.at) || !slices.Equal(status, tt.status) {
				t.Errorf("keys %q, times %v, statuses %v; want %q, %v, %v", keys, ats, status, tt.keys, tt.at, tt.status)
			}
			if got[0].Agent != hashOf([]byte(tt.agent)) || got[0].Path != hashOf([]byte(tt.path)) {
				t.Errorf("the first line's agent or path is not %q, %q", tt.agent, tt.path)
			}
			// A log of the product read as nginx's (the default) fails
			// saying which it reads as.
			first, _, _ := strings.Cut(tt.lines, "\n")
			if err := readAll(strings.Repeat(first+"\n", hopeless), Options{}); err == nil || !strings.Contains(err.Error(), "format combined: it reads as --format "+tt.format+" (the first:") {
				t.Errorf("%s's lines read as combined: %v; want it said they read as --format %s", tt.format, err, tt.format)
			}
			// A field an option names wins over the preset's.
			if tt.same.Format == JSON {
				o := Options{Format: tt.format, Status: ".nothing_here"}
				e, _ := read(t, tt.lines, o)
				if e[0].Status != 0 {
					t.Errorf("--status .nothing_here beside --format %s: status %d, want none", tt.format, e[0].Status)
				}
			}
		})
	}
}

// readAll reads log to its end: nil, or the error that stopped it.
func readAll(log string, o Options) error {
	r, err := NewReader([]Input{{Name: "access.log", R: strings.NewReader(log)}}, o)
	if err != nil {
		return err
	}
	for {
		if _, err := r.Read(); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// nginx's lines read as Caddy's: the error names nginx's format; lines
// of no format ratelab knows: it asks, and names none.
func TestReadsAs(t *testing.T) {
	nginx := `203.0.113.9 - - [10/Oct/2026:13:55:36 +0000] "GET /v1/feed HTTP/1.1" 200 512 "-" "curl/8.0"` + "\n"
	if err := readAll(nginx, Options{Format: "caddy"}); err == nil || !strings.HasPrefix(err.Error(), "no line is a request of the format caddy: it reads as --format combined (the first:") {
		t.Errorf("nginx's line read as caddy's: %v; want it said that it reads as combined", err)
	}
	err := readAll(strings.Repeat("GET /v1/feed 200 0.004\n", hopeless), Options{})
	if err == nil || !strings.Contains(err.Error(), "format combined: is it another? (--format) (the first:") {
		t.Errorf("lines of no format: %v; want the format asked for", err)
	}
	// Fewer lines than a Reader gives up after: the same, at the end.
	err = readAll("GET /v1/feed 200 0.004\n", Options{})
	if err == nil || !strings.HasPrefix(err.Error(), "no line is a request of the format combined: is it another? (--format) (the first:") {
		t.Errorf("a line of no format: %v; want the format asked for", err)
	}
}

// --key header:X-Api-Key reads each product's own field for a logged
// header: Traefik's request_X-Api-Key, Caddy's request.headers.X-Api-Key
// (an array), Cloudflare's RequestHeaders.x-api-key, nginx's
// $http_x_api_key, a JSON log's http_x_api_key; a product that logs no
// header says so. A line without the key (a health check) is counted
// apart and named by its path.
func TestHeaderKeyByProduct(t *testing.T) {
	key, err := ParseKey("header:x-api-key")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		format, lines string
	}{
		{"traefik", `{"ClientHost":"192.0.2.1","DownstreamStatus":200,"RequestPath":"/v1/orders","StartUTC":"2026-11-27T08:00:00.1Z","request_User-Agent":"acme-sync/2.4.1","request_X-Api-Key":"key_1"}
{"ClientHost":"192.0.2.9","DownstreamStatus":200,"RequestPath":"/healthz","StartUTC":"2026-11-27T08:00:00.2Z","request_User-Agent":"kube-probe/1.31"}
`},
		{"caddy", `{"ts":1764230400.1,"request":{"client_ip":"192.0.2.1","uri":"/v1/orders","headers":{"User-Agent":["acme-sync/2.4.1"],"X-Api-Key":["key_1"]}},"status":200}
{"ts":1764230400.2,"request":{"client_ip":"192.0.2.9","uri":"/healthz","headers":{"User-Agent":["kube-probe/1.31"]}},"status":200}
`},
		{"cloudflare", `{"ClientIP":"192.0.2.1","ClientRequestURI":"/v1/orders","EdgeResponseStatus":200,"EdgeStartTimestamp":1764230400100000000,"RequestHeaders":{"x-api-key":"key_1"}}
{"ClientIP":"192.0.2.9","ClientRequestURI":"/healthz","EdgeResponseStatus":200,"EdgeStartTimestamp":1764230400200000000,"RequestHeaders":{}}
`},
		{"json", `{"time":"2026-11-27T08:00:00.1Z","remote_addr":"192.0.2.1","path":"/v1/orders","status":200,"http_x_api_key":"key_1"}
{"time":"2026-11-27T08:00:00.2Z","remote_addr":"192.0.2.9","path":"/healthz","status":200,"http_x_api_key":""}
`},
		{`$remote_addr [$time_iso8601] "$request" $status "$http_x_api_key"`, `192.0.2.1 [2026-11-27T08:00:00+00:00] "GET /v1/orders HTTP/1.1" 200 "key_1"
192.0.2.9 [2026-11-27T08:00:01+00:00] "GET /healthz HTTP/1.1" 200 "-"
`},
	} {
		r, err := NewReader([]Input{{Name: "access.log", R: strings.NewReader(tt.lines)}}, Options{Format: tt.format, Key: key})
		if err != nil {
			t.Fatalf("%s: %v", tt.format, err)
		}
		e, err := r.Read()
		if err != nil || e.Key != "key_1" {
			t.Errorf("%s: the first request's key %q (%v); want key_1", tt.format, e.Key, err)
			continue
		}
		if _, err := r.Read(); err != io.EOF {
			t.Errorf("%s: a second request read (%v); the health check has no key", tt.format, err)
		}
		n, first := r.NoKey()
		if skipped, _ := r.Skipped(); n != 1 || skipped != 1 || first.Where != "access.log:2" || !strings.HasSuffix(first.Why, "/healthz") {
			t.Errorf("%s: %d lines without a key (%d skipped), the first %v; want 1, access.log:2, naming /healthz", tt.format, n, skipped, first)
		}
	}
	for _, format := range []string{"gcp", "alb"} {
		_, err := NewReader([]Input{{Name: "lb.log", R: strings.NewReader("")}}, Options{Format: format, Key: key})
		if err == nil || !strings.Contains(err.Error(), "keeps no request header") {
			t.Errorf("%s with --key header:x-api-key: %v; want an error saying it logs no header", format, err)
		}
	}
}

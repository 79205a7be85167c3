package matrix

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/render/rendertest"
	. "github.com/nats-operator/nats-operator/pkg/rollout"
)

// What the controller's system user block does to a server without auth, as
// measured by hand with nats-server 2.15.2 and asserted here by both
// matrices: /varz auth_required turns true, yet a client without credentials
// still lands in the global account $G (nats-server adds a no-auth user of
// $G of its own), its streams with it; the system user lands in $SYS, and
// every server answers its $SYS.REQ.SERVER.PING, the servers without the
// block included.

// systemUserPassword is the fixture password of a rendered hash ("" for
// none).
func systemUserPassword(u *render.SystemUser) string {
	switch {
	case u == nil:
		return ""
	case u.PasswordHash == rendertest.RotatedSystemUserHash:
		return rendertest.RotatedSystemUserPassword
	default:
		return rendertest.SystemUserPassword
	}
}

// userInfo is the data of a $SYS.REQ.USER.INFO reply.
type userInfo struct {
	User    string `json:"user"`
	Account string `json:"account"`
}

// whoAmI connects to s with opts and asks which user and account the
// connection has.
func whoAmI(s *natsServer, opts ...nats.Option) (userInfo, error) {
	var u userInfo
	nc, err := nats.Connect(s.url(), append(append([]nats.Option{nats.Timeout(2 * time.Second), nats.NoReconnect(), nats.IgnoreDiscoveredServers()}, s.running.tlsOptions()...), opts...)...)
	if err != nil {
		return u, err
	}
	defer nc.Close()
	m, err := nc.Request("$SYS.REQ.USER.INFO", nil, 2*time.Second)
	if err != nil {
		return u, err
	}
	var r struct {
		Data  userInfo        `json:"data"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return u, err
	}
	if len(r.Error) > 0 {
		return u, fmt.Errorf("user info: %s", r.Error)
	}
	return r.Data, nil
}

// pingReplies connects to s as the system user and counts the servers that
// answer $SYS.REQ.SERVER.PING within a second.
func pingReplies(s *natsServer, auth nats.Option) (int, error) {
	nc, err := nats.Connect(s.url(), append(s.running.tlsOptions(), nats.Timeout(2*time.Second), nats.NoReconnect(), nats.IgnoreDiscoveredServers(),
		auth)...)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync(nats.NewInbox())
	if err != nil {
		return 0, err
	}
	if err := nc.PublishRequest("$SYS.REQ.SERVER.PING", sub.Subject, nil); err != nil {
		return 0, err
	}
	n := 0
	for {
		m, err := sub.NextMsg(time.Second)
		if err != nil {
			return n, nil
		}
		if len(m.Data) > 0 { // a no-responders status has none
			n++
		}
	}
}

// systemUserOnce checks every server without auth once: /varz
// auth_required is true exactly when its config has the system user; a
// client without credentials lands in $G; with the system user, the user
// lands in $SYS and every server answers its ping. summary is one mark per
// server: a = auth_required (. = not), g = anonymous client in $G, s =
// system user in $SYS answered by every server (. = no system user); - =
// failed; servers with auth are "n/a".
func systemUserOnce(servers []*natsServer) (ok bool, summary, detail string) {
	ok = true
	var marks []string
	fail := func(d string) {
		if ok {
			detail = d
		}
		ok = false
	}
	for _, s := range servers {
		if s.running.Creds != "" {
			marks = append(marks, "n/a")
			continue
		}
		mark := func(b bool, c string) string {
			if b {
				return c
			}
			return "-"
		}
		var m strings.Builder
		v, err := s.varz()
		if err != nil {
			fail(fmt.Sprintf("reading /varz of %s: %v", s.name(), err))
		} else if v.AuthRequired != s.running.HasSystemUser() {
			fail(fmt.Sprintf("%s: /varz auth_required %t with the system user %t", s.name(), v.AuthRequired, s.running.HasSystemUser()))
		}
		switch {
		case err != nil:
			m.WriteString("-")
		case v.AuthRequired:
			m.WriteString("a")
		default:
			m.WriteString(".")
		}
		u, err := whoAmI(s)
		inG := err == nil && u.Account == GlobalAccount
		if !inG {
			fail(fmt.Sprintf("%s: a client without credentials is %+v (%v), want in %s", s.name(), u, err, GlobalAccount))
		}
		m.WriteString(mark(inG, "g"))
		if !s.running.HasSystemUser() {
			m.WriteString(".")
			marks = append(marks, m.String())
			continue
		}
		u, err = whoAmI(s, s.running.systemAuth())
		inSys := err == nil && u.Account == "$SYS"
		n, perr := pingReplies(s, s.running.systemAuth())
		if !inSys || perr != nil || n != len(servers) {
			fail(fmt.Sprintf("%s: the system user is %+v (%v), %d of %d servers answer its ping (%v)", s.name(), u, err, n, len(servers), perr))
		}
		m.WriteString(mark(inSys && perr == nil && n == len(servers), "s"))
		marks = append(marks, m.String())
	}
	return ok, strings.Join(marks, ","), detail
}

// systemUserRuns polls systemUserOnce until it passes or the wait runs out,
// and returns the last result.
func systemUserRuns(servers []*natsServer, wait time.Duration) (ok bool, summary, detail string) {
	deadline := time.Now().Add(wait)
	for {
		ok, summary, detail = systemUserOnce(servers)
		if ok || time.Now().After(deadline) {
			return ok, summary, detail
		}
		time.Sleep(300 * time.Millisecond)
	}
}

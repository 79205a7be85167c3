// minirepro: three nats-server processes in one cluster, in operator mode.
// s1 has a full resolver and holds the JWTs of accounts A and B (with -push,
// B is pushed through s1 after the reload); s2 and s3 have the resolver under
// test and preload only the system account, so they fetch A and B from s1
// when a user of them first connects. After a config reload of
// s2 (server_tags added), s2 runs with a resolver that reloadAuthorization
// installed without Start: it no longer fetches, and a user of B, which s2
// has not loaded yet, cannot connect to s2, while it still can on s3.
// With -resolver mem all three use resolver: MEMORY, B is added to the
// preload of all three and all three are reloaded: B connects everywhere.
// Exit status: 0 if every server let the users in, 1 if only the reloaded
// server refused them (the defect), 2 for anything else.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

var (
	bin  = flag.String("bin", "nats-server", "nats-server binary")
	dir  = flag.String("dir", "", "work directory (configs, logs, resolver dirs, pids)")
	mode = flag.String("resolver", "full", "resolver of s2 and s3: full, cache or mem (mem: all three)")
	push = flag.Bool("push", false, "push B's JWT through s1 after the reload with $SYS.REQ.CLAIMS.UPDATE instead of preloading it on s1")
	same = flag.Bool("same", false, "reload s2 with its config file unchanged (no server_tags)")
	wait = flag.Duration("wait", 0, "wait this long after the reload before connecting the users")

	procs []*exec.Cmd
	op    nkeys.KeyPair
	opJWT string
)

type account struct {
	name, pub, jwt    string
	userJWT, userSeed string
}

func die(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "minirepro: "+format+"\n", args...)
	for _, p := range procs {
		p.Process.Kill()
	}
	os.Exit(2)
}

func check(err error) {
	if err != nil {
		die("%v", err)
	}
}

func newAccount(name string) account {
	kp, err := nkeys.CreateAccount()
	check(err)
	pub, _ := kp.PublicKey()
	ac := jwt.NewAccountClaims(pub)
	ac.Name = name
	a := account{name: name, pub: pub}
	a.jwt, err = ac.Encode(op)
	check(err)
	ukp, err := nkeys.CreateUser()
	check(err)
	upub, _ := ukp.PublicKey()
	seed, _ := ukp.Seed()
	uc := jwt.NewUserClaims(upub)
	uc.Name = name + "-user"
	a.userJWT, err = uc.Encode(kp)
	check(err)
	a.userSeed = string(seed)
	return a
}

// config of server i (1..3); s1 is full unless mode is mem.
func config(i int, tags bool, preload []account) string {
	res := *mode
	if i == 1 && res != "mem" {
		res = "full"
	}
	if res == "mem" {
		res = "MEMORY"
	} else {
		res = fmt.Sprintf("{ type: %s, dir: %q }", res, filepath.Join(*dir, fmt.Sprintf("jwt%d", i)))
	}
	var pre []string
	for _, a := range preload {
		pre = append(pre, fmt.Sprintf("  %s: %s", a.pub, a.jwt))
	}
	c := fmt.Sprintf(`server_name: s%d
listen: 127.0.0.1:2400%d
http: 127.0.0.1:2420%d
cluster {
  name: repro
  listen: 127.0.0.1:2410%d
  routes: [nats://127.0.0.1:24101, nats://127.0.0.1:24102, nats://127.0.0.1:24103]
}
operator: %s
system_account: %s
resolver: %s
resolver_preload: {
%s
}
`, i, i, i, i, opJWT, preload[0].pub, res, strings.Join(pre, "\n"))
	if tags {
		c += "server_tags: [\"reloaded\"]\n"
	}
	return c
}

func writeConfig(i int, c string) string {
	path := filepath.Join(*dir, fmt.Sprintf("s%d.conf", i))
	check(os.WriteFile(path, []byte(c), 0o600))
	return path
}

func varz(i int) map[string]any {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:2420%d/varz", i))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var v map[string]any
	if json.NewDecoder(resp.Body).Decode(&v) != nil {
		return nil
	}
	return v
}

func routes(i int) float64 {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:2420%d/routez", i))
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var v struct {
		NumRoutes float64 `json:"num_routes"`
	}
	json.NewDecoder(resp.Body).Decode(&v)
	return v.NumRoutes
}

func reload(i int, c string) {
	before := varz(i)["config_load_time"]
	writeConfig(i, c)
	check(procs[i-1].Process.Signal(syscall.SIGHUP))
	for start := time.Now(); varz(i)["config_load_time"] == before; time.Sleep(100 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			die("s%d did not apply the reload (see s%d.log)", i, i)
		}
	}
}

// connect a user of a to server i, retrying for up to 5 s; "" means it worked.
func connect(i int, a account) string {
	var err error
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(250 * time.Millisecond) {
		var nc *nats.Conn
		// IgnoreDiscoveredServers: else Connect moves on to the servers that
		// s<i>'s INFO advertised and reports success from one of them.
		nc, err = nats.Connect(fmt.Sprintf("nats://127.0.0.1:2400%d", i), nats.UserJWTAndSeed(a.userJWT, a.userSeed),
			nats.IgnoreDiscoveredServers(), nats.Timeout(2*time.Second))
		if err == nil {
			name := nc.ConnectedServerName()
			nc.Close()
			if name != fmt.Sprintf("s%d", i) {
				die("connected to %s, not s%d", name, i)
			}
			return ""
		}
	}
	return err.Error()
}

func main() {
	flag.Parse()
	if *dir == "" || (*mode != "full" && *mode != "cache" && *mode != "mem") || (*mode == "mem" && *push) {
		die("usage: minirepro -bin nats-server -dir DIR -resolver full|cache|mem [-push (not with mem)] [-same] [-wait 70s]")
	}
	tag := "RESOLVER=" + *mode
	if *push {
		tag += " PUSH=1"
	}
	if *same {
		tag += " SAME=1"
	}
	if *wait > 0 {
		tag += " WAIT=" + wait.String()
	}
	tag += ":"
	var err error
	op, err = nkeys.CreateOperator()
	check(err)
	opPub, _ := op.PublicKey()
	sys, a, b := newAccount("SYS"), newAccount("A"), newAccount("B")
	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = "repro"
	oc.SystemAccount = sys.pub
	opJWT, err = oc.Encode(op)
	check(err)

	s1Preload := []account{sys, a}
	if *mode != "mem" && !*push {
		s1Preload = append(s1Preload, b) // B is on s1 only: s2 and s3 must fetch it
	}
	var pids []string
	for i := 1; i <= 3; i++ {
		pre := []account{sys}
		if i == 1 || *mode == "mem" {
			pre = s1Preload
		}
		cmd := exec.Command(*bin, "-c", writeConfig(i, config(i, false, pre)))
		log, err := os.Create(filepath.Join(*dir, fmt.Sprintf("s%d.log", i)))
		check(err)
		cmd.Stdout, cmd.Stderr = log, log
		check(cmd.Start())
		procs = append(procs, cmd)
		pids = append(pids, fmt.Sprint(cmd.Process.Pid))
	}
	check(os.WriteFile(filepath.Join(*dir, "pids"), []byte(strings.Join(pids, " ")+"\n"), 0o600))
	for i := 1; i <= 3; i++ {
		for start := time.Now(); routes(i) < 2; time.Sleep(100 * time.Millisecond) {
			if time.Since(start) > 20*time.Second {
				die("s%d has no routes to the other two (see s%d.log)", i, i)
			}
		}
	}
	time.Sleep(time.Second)

	role := func(i int) string {
		r := *mode
		if i == 1 && r != "mem" {
			r = "full"
		}
		if i == 2 {
			return r + ", the one reloaded"
		} else if r == "mem" {
			return r + ", reloaded too"
		}
		return r + ", not reloaded"
	}
	report := func(when string, i int, acc account) string {
		e := connect(i, acc)
		out := "connected"
		if e != "" {
			out = "FAILED: " + e
		}
		fmt.Printf("%s %-13s user of %s on s%d (%s): %s\n", tag, when, acc.name, i, role(i), out)
		return e
	}
	for i := 1; i <= 3; i++ {
		if report("before reload", i, a) != "" {
			die("lookup between peers does not work even before the reload")
		}
	}

	if *mode == "mem" {
		pre := []account{sys, a, b}
		for i := 1; i <= 3; i++ {
			reload(i, config(i, i == 2 && !*same, pre))
		}
		fmt.Printf("%s reloaded s1, s2 and s3 with B added to their resolver_preload\n", tag)
	} else if reload(2, config(2, !*same, []account{sys})); *same {
		fmt.Printf("%s reloaded s2 with its config file unchanged\n", tag)
	} else {
		fmt.Printf("%s reloaded s2 with server_tags added\n", tag)
	}
	time.Sleep(*wait)
	if *push {
		nc, err := nats.Connect("nats://127.0.0.1:24001", nats.UserJWTAndSeed(sys.userJWT, sys.userSeed))
		check(err)
		m, err := nc.Request("$SYS.REQ.CLAIMS.UPDATE", []byte(b.jwt), 2*time.Second)
		check(err)
		var r struct {
			Server struct{ Name string }
			Data   struct{ Message string }
		}
		json.Unmarshal(m.Data, &r)
		fmt.Printf("%s pushed B through s1, first answer from %s: %s\n", tag, r.Server.Name, r.Data.Message)
		nc.Close()
		time.Sleep(time.Second)
	}
	failed := map[int]bool{}
	for i := 1; i <= 3; i++ {
		failed[i] = report("after reload", i, b) != ""
	}
	// Users of A (loaded before the reload) still get in everywhere.
	for i := 1; i <= 3; i++ {
		failed[i] = report("after reload", i, a) != "" || failed[i]
	}
	for _, p := range procs {
		p.Process.Kill()
		p.Wait()
	}
	switch {
	case !failed[1] && !failed[2] && !failed[3]:
		fmt.Printf("%s no defect: every server let the users in\n", tag)
	case !failed[1] && failed[2] && !failed[3]:
		fmt.Printf("%s DEFECT: only the reloaded server s2 refused a user\n", tag)
		os.Exit(1)
	default:
		fmt.Printf("%s unexpected failures %v\n", tag, failed)
		os.Exit(2)
	}
}

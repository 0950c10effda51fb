package comm

import (
	"errors"
	"testing"
)

func TestEnvFromOS(t *testing.T) {
	tests := []struct {
		name    string
		vars    map[string]string
		want    Env
		wantErr bool
	}{
		{"nothing", nil, Env{0, 1, 0, 1, "127.0.0.1", DefaultMasterPort}, false},
		{"torchrun", map[string]string{"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "1234"},
			Env{3, 8, 1, 2, "10.0.0.1", 1234}, false},
		{"torchrun without local", map[string]string{"RANK": "2", "WORLD_SIZE": "4", "MASTER_PORT": "999"}, Env{2, 4, 2, 4, "127.0.0.1", 999}, false},
		{"lws", map[string]string{"LWS_LEADER_ADDRESS": "leader.svc", "LWS_GROUP_SIZE": "4", "LWS_WORKER_INDEX": "2"}, Env{2, 4, 0, 1, "leader.svc", DefaultMasterPort}, false},
		{"lws with port", map[string]string{"LWS_LEADER_ADDRESS": "l", "LWS_GROUP_SIZE": "2", "LWS_WORKER_INDEX": "0", "MASTER_PORT": "7000"}, Env{0, 2, 0, 1, "l", 7000}, false},
		{"torchrun wins over lws", map[string]string{"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "m", "LWS_LEADER_ADDRESS": "l", "LWS_GROUP_SIZE": "9", "LWS_WORKER_INDEX": "5"}, Env{1, 2, 1, 2, "m", DefaultMasterPort}, false},
		{"torchrun's agent store holds the port", map[string]string{"RANK": "1", "WORLD_SIZE": "2", "MASTER_PORT": "29500", "TORCHELASTIC_USE_AGENT_STORE": "True"},
			Env{1, 2, 1, 2, "127.0.0.1", 29501}, false},
		{"spaces trimmed", map[string]string{"RANK": " 1 ", "WORLD_SIZE": "2 "}, Env{1, 2, 1, 2, "127.0.0.1", DefaultMasterPort}, false},
		{"rank >= world", map[string]string{"RANK": "4", "WORLD_SIZE": "4"}, Env{}, true},
		{"negative rank", map[string]string{"RANK": "-1", "WORLD_SIZE": "4"}, Env{}, true},
		{"rank without world", map[string]string{"RANK": "0"}, Env{}, true},
		{"not a number", map[string]string{"RANK": "x", "WORLD_SIZE": "2"}, Env{}, true},
		{"zero world", map[string]string{"RANK": "0", "WORLD_SIZE": "0"}, Env{}, true},
		{"bad port", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "70000"}, Env{}, true},
		{"port zero in a world", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "0"}, Env{}, true},
		{"local rank out of range", map[string]string{"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2"}, Env{}, true},
		{"local world > world", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "3"}, Env{}, true},
		{"partial lws", map[string]string{"LWS_GROUP_SIZE": "2"}, Env{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EnvFromOS(func(k string) string { return tc.vars[k] })
			if tc.wantErr {
				if !errors.Is(err, ErrEnv) {
					t.Fatalf("err = %v, want ErrEnv (got env %+v)", err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestEnvEnvironRoundTrip(t *testing.T) {
	e := Env{Rank: 5, WorldSize: 8, LocalRank: 1, LocalWorldSize: 4, MasterAddr: "::1", MasterPort: 4242}
	vars := map[string]string{}
	for _, kv := range e.Environ() {
		for i := range kv {
			if kv[i] == '=' {
				vars[kv[:i]] = kv[i+1:]
				break
			}
		}
	}
	got, err := EnvFromOS(func(k string) string { return vars[k] })
	if err != nil || got != e {
		t.Fatalf("got %+v, %v; want %+v", got, err, e)
	}
	if hp := e.MasterHostPort(); hp != "[::1]:4242" {
		t.Fatalf("MasterHostPort = %q", hp)
	}
}

package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/drainwatch/drainwatch/testenv/router"
)

// RouterConfig selects the Service a router follows and its propagation delay.
type RouterConfig struct {
	Namespace, Service, PortName string
	Delay                        time.Duration
	KeepAlive                    bool // pool backend connections (see router.Config.KeepAlive)
	// DialTimeout bounds a backend dial (router.Config's 1 s when zero). On
	// a loaded machine a refusal can come back later than 1 s: the router
	// would record a timeout where the kernel saw a refusal.
	DialTimeout time.Duration
}

// StartRouter starts a router inside the fabric: it listens on the fabric's
// loopback (127.0.0.1:<free port>, reachable only from inside the fabric, e.g.
// with c.Dial) and dials pods from there. It stops when ctx ends.
func (c *Cluster) StartRouter(ctx context.Context, cfg RouterConfig) (*router.Router, error) {
	ln, err := c.Fabric.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("router listener in the fabric: %w", err)
	}
	r, err := router.Start(ctx, router.Config{Client: c.Client, Namespace: cfg.Namespace, Service: cfg.Service,
		PortName: cfg.PortName, Delay: cfg.Delay, KeepAlive: cfg.KeepAlive, DialTimeout: cfg.DialTimeout, Listener: ln, Dial: c.Fabric.Dial, Log: c.log})
	if err != nil {
		ln.Close()
		return nil, err
	}
	return r, nil
}

'use strict';
// Preloaded with `node -r tests/peers/loopback.cjs server.js`: every TCP listen() in this process binds
// 127.0.0.1, whatever host (or none) the server asked for. server-everything's Streamable HTTP server
// calls `app.listen(PORT)`, which would bind all interfaces; a test peer must not be reachable from the
// network.
//
// Once a server is listening, one line goes to stderr with the port it really got, so `PORT=0` can be
// used (no port guessing, no race):
//
//     MCP-RUN-LOOPBACK listening on 127.0.0.1:PORT
//
// IPC listens (a path, a file descriptor, a handle) are left alone.

const net = require('net');

const LOOPBACK = '127.0.0.1';
const originalListen = net.Server.prototype.listen;

function isPort(value) {
  return typeof value === 'number' || (typeof value === 'string' && /^\d+$/.test(value));
}

function announce(server) {
  server.once('listening', () => {
    const address = server.address();
    if (address && typeof address === 'object') {
      process.stderr.write(`MCP-RUN-LOOPBACK listening on ${address.address}:${address.port}\n`);
    }
  });
}

net.Server.prototype.listen = function listen(...args) {
  const first = args[0];
  if (first === undefined || typeof first === 'function') {
    // listen([callback]): a random port on every interface.
    args.unshift(0, LOOPBACK);
    announce(this);
  } else if (isPort(first)) {
    // listen(port[, host][, backlog][, callback])
    if (typeof args[1] === 'string') {
      args[1] = LOOPBACK;
    } else {
      args.splice(1, 0, LOOPBACK);
    }
    announce(this);
  } else if (first !== null && typeof first === 'object' && first.path === undefined && first.fd === undefined &&
             first.handle === undefined && !('_handle' in first)) {
    // listen(options[, callback])
    args[0] = { ...first, host: LOOPBACK };
    announce(this);
  }
  return originalListen.apply(this, args);
};

// A preload (node --import ./loopback-only.mjs) for servers that listen on
// every interface given only a port (server-everything's Streamable HTTP
// transport): it binds them to 127.0.0.1, as every server a test starts
// must be, and prints the address it got, so a test can pass PORT=0 and
// read the port back instead of guessing a free one.
import net from 'node:net';

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  if ((typeof port === 'number' || (typeof port === 'string' && /^\d+$/.test(port))) && typeof args[1] !== 'string') {
    args.splice(1, 0, '127.0.0.1');
  }
  this.once('listening', () => {
    const a = this.address();
    if (a && typeof a === 'object') process.stderr.write(`loopback-only: listening on ${a.address}:${a.port}\n`);
  });
  return listen.apply(this, args);
};

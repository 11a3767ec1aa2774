//! A TCP proxy that can partition: a replica reaches each etcd member
//! through one, and the chaos schedule cuts it. While partitioned, bytes
//! stop flowing both ways on open connections and new connections are
//! accepted but never forwarded, as a black hole does (the peer sees
//! timeouts, not resets); when the partition heals those connections are
//! dropped and new ones flow again.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct Proxy {
    pub addr: SocketAddr,
    partitioned: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    /// Listens on a free port of 127.0.0.1 and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("proxy listener");
        let addr = listener.local_addr().expect("proxy address");
        let (partitioned, rx) = watch::channel(false);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(serve(client, upstream, rx.clone()));
            }
        });
        Proxy {
            addr,
            partitioned,
            task,
        }
    }

    /// Cuts (`true`) or heals (`false`) the link.
    pub fn partition(&self, cut: bool) {
        self.partitioned.send_replace(cut);
    }
}

/// Waits until the link is in state `cut`.
async fn until(rx: &mut watch::Receiver<bool>, cut: bool) {
    let _ = rx.wait_for(|&c| c == cut).await;
}

async fn serve(mut client: TcpStream, upstream: SocketAddr, mut rx: watch::Receiver<bool>) {
    if *rx.borrow() {
        // Held open, never answered, dropped when the link heals.
        until(&mut rx, false).await;
        return;
    }
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (mut cr, mut cw) = client.split();
    let (mut sr, mut sw) = server.split();
    let mut up = [0u8; 16 * 1024];
    let mut down = [0u8; 16 * 1024];
    loop {
        tokio::select! {
            _ = until(&mut rx, true) => {
                // Partitioned: nothing moves until the link heals, then the
                // connection is gone.
                until(&mut rx, false).await;
                return;
            }
            n = cr.read(&mut up) => match n {
                Ok(0) | Err(_) => return,
                Ok(n) => if sw.write_all(&up[..n]).await.is_err() { return },
            },
            n = sr.read(&mut down) => match n {
                Ok(0) | Err(_) => return,
                Ok(n) => if cw.write_all(&down[..n]).await.is_err() { return },
            },
        }
    }
}

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.*;
import org.apache.rocketmq.client.producer.*;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.*;
import java.util.*;
import java.util.concurrent.*;
// Hold NS TOPIC N HOLD_SECONDS TRACE: send N messages (key k<i>), consume them with a push consumer,
// print {"got":..,"ids":[..]}, then print READY and stay online HOLD_SECONDS (for mqadmin to look).
public class Hold {
  public static void main(String[] a) throws Exception {
    String ns = a[0]; String topic = a[1]; int n = Integer.parseInt(a[2]);
    int hold = Integer.parseInt(a[3]); boolean trace = Boolean.parseBoolean(a[4]);
    DefaultMQProducer p = new DefaultMQProducer("pg_" + topic, trace); p.setNamesrvAddr(ns); p.start();
    List<String> ids = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      Message m = new Message(topic, "TagA", "k" + i, ("m" + i).getBytes());
      ids.add(p.send(m).getMsgId());
    }
    Set<String> got = ConcurrentHashMap.newKeySet();
    DefaultMQPushConsumer c = new DefaultMQPushConsumer("cg_" + topic, trace); c.setNamesrvAddr(ns);
    c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
    c.subscribe(topic, "*");
    c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> { for (MessageExt m : msgs) got.add(new String(m.getBody())); return ConsumeConcurrentlyStatus.CONSUME_SUCCESS; });
    long t0 = System.currentTimeMillis(); c.start();
    while (got.size() < n && System.currentTimeMillis() - t0 < 60000) Thread.sleep(100);
    StringBuilder sb = new StringBuilder();
    for (String id : ids) sb.append(sb.length() == 0 ? "" : ",").append('"').append(id).append('"');
    System.out.println("{\"got\":" + got.size() + ",\"ids\":[" + sb + "]}");
    c.getDefaultMQPushConsumerImpl().getOffsetStore().persistAll(c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().keySet());
    System.out.println("READY"); System.out.flush();
    Thread.sleep(hold * 1000L);
    c.shutdown(); p.shutdown();
  }
}

package flinkstate.spark;

import java.util.Collections;
import java.util.List;

import org.apache.spark.Partition;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.rdd.RDD;
import scala.collection.Iterator;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Its parent's partitions, one to one, each preferring the executor given for it.
 *
 * <p>flinkstate's {@code process} runs subtask i in partition i. Preferring the executor that
 * kept subtask i's state lets Spark's scheduler send the task there (as Spark's state store
 * does with its own preferred locations). Each task also records in its local properties where
 * it ran ({@link #LOCATION}), so its Python worker can report it for the next run.
 */
public final class PlacedRDD<T> extends RDD<T> {
  private static final long serialVersionUID = 1L;

  /** The local property a task of this RDD sets to the location it ran on. */
  public static final String LOCATION = "flinkstate.executor.location";

  private final String[] locations;

  /**
   * @param parent the partitions to forward
   * @param locations per partition, a Spark task location ({@code executor_<host>_<id>}) or ""
   */
  public PlacedRDD(RDD<T> parent, String[] locations) {
    super(parent, parent.elementClassTag());
    if (locations.length != parent.getNumPartitions()) {
      throw new IllegalArgumentException(
          "expected " + parent.getNumPartitions() + " locations, got " + locations.length);
    }
    this.locations = locations.clone();
  }

  @SuppressWarnings("unchecked")
  private RDD<T> parent() {
    return (RDD<T>) dependencies().head().rdd();
  }

  @Override
  public Partition[] getPartitions() {
    return parent().partitions();
  }

  @Override
  public Seq<String> getPreferredLocations(Partition split) {
    String location = locations[split.index()];
    List<String> out = location.isEmpty() ? Collections.emptyList() : List.of(location);
    return CollectionConverters.asScala(out).toList();
  }

  @Override
  public Iterator<T> compute(Partition split, TaskContext context) {
    SparkEnv env = SparkEnv.get();
    String host = env.blockManager().blockManagerId().host();
    context.getLocalProperties().setProperty(LOCATION, "executor_" + host + "_" + env.executorId());
    return parent().iterator(split, context);
  }
}
